package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

// TestLaunchRegisterInitialize walks one NodeClaim through its whole life:
// the conditions and log lines match what upstream's describe output and
// logs show, the Node receives the NodeClaim's metadata, and deletion
// removes the Node and the instance before the finalizer.
func TestLaunchRegisterInitialize(t *testing.T) {
	e := newEnv(t)
	e.cloud.CreateLabels = map[string]string{"team": "provider", "example.com/provider-label": "x"}
	nc := e.nodeClaim(func(nc *v1.NodeClaim) {
		nc.Spec.TerminationGracePeriod = &v1.Duration{Duration: time.Hour}
	})

	// Launch.
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	require.True(t, controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer))
	require.Equal(t, "fake:///"+nc.Name, nc.Status.ProviderID)
	require.Equal(t, "fake-image-1", nc.Status.ImageID)
	require.Equal(t, "3900m", ptrQ(nc.Status.Allocatable, corev1.ResourceCPU))
	require.Equal(t, "user", nc.Labels["team"], "user labels win over provider labels")
	require.Equal(t, "x", nc.Labels["example.com/provider-label"])
	require.Equal(t, "gold", nc.Labels["example.com/tier"], "single-valued requirements become labels")
	require.Equal(t, "fake.large", nc.Labels[corev1.LabelInstanceTypeStable])
	requireCondition(t, nc, v1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched")
	requireCondition(t, nc, v1.ConditionTypeRegistered, metav1.ConditionUnknown, "NodeNotFound")
	requireCondition(t, nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "NodeNotFound")
	requireCondition(t, nc, v1.ConditionTypeReady, metav1.ConditionUnknown, "UnhealthyDependents")
	launched := e.logs.Matching("launched nodeclaim")
	require.Len(t, launched, 1)
	for _, kv := range []string{`"provider-id":"fake:///`, `"instance-type":"fake.large"`, `"zone":"test-zone-a"`, `"capacity-type":"on-demand"`, `"allocatable":{`} {
		require.Contains(t, launched[0], kv)
	}

	// Registration.
	node := e.kubeletNode(nc)
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	requireCondition(t, nc, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
	requireCondition(t, nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "NodeNotReady")
	require.Equal(t, node.Name, nc.Status.NodeName)
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	require.Equal(t, "true", node.Labels[v1.NodeRegisteredLabelKey])
	require.Equal(t, "user", node.Labels["team"])
	require.Equal(t, "default", node.Labels[v1.NodePoolLabelKey])
	require.True(t, controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer))
	require.Len(t, node.OwnerReferences, 1)
	require.Equal(t, "NodeClaim", node.OwnerReferences[0].Kind)
	require.Equal(t, nc.UID, node.OwnerReferences[0].UID)
	require.ElementsMatch(t, []string{"example.com/startup", "example.com/special"}, taintKeys(node))
	registered := e.logs.Matching("registered nodeclaim")
	require.Len(t, registered, 1)
	require.Contains(t, registered[0], `"Node":{"name":"`+node.Name+`"}`)

	// Initialization waits for Ready, then for the startup taint.
	e.setNodeReady(node)
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	requireCondition(t, nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "StartupTaintsExist")
	require.Contains(t, nodeclaimCond(nc, v1.ConditionTypeInitialized).Message, `"example.com/startup:NoSchedule"`)

	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	node.Spec.Taints = removeTaint(node.Spec.Taints, "example.com/startup")
	require.NoError(t, cp.Client.Update(e.ctx, node))
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	for _, ct := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady} {
		requireCondition(t, nc, ct, metav1.ConditionTrue, ct)
	}
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	require.Equal(t, "true", node.Labels[v1.NodeInitializedLabelKey])
	require.Len(t, e.logs.Matching("initialized nodeclaim"), 1)
	require.Contains(t, e.logs.Matching("initialized nodeclaim")[0], `"allocatable":{`)

	var transitions []string
	for _, ev := range e.events.Events("") {
		if strings.HasPrefix(ev.Message, "Status condition transitioned") {
			transitions = append(transitions, ev.Message)
		}
	}
	require.Equal(t, []string{
		"Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched",
		"Status condition transitioned, Type: Registered, Status: Unknown -> True, Reason: Registered",
		"Status condition transitioned, Type: Initialized, Status: Unknown -> True, Reason: Initialized",
		"Status condition transitioned, Type: Ready, Status: Unknown -> True, Reason: Ready",
	}, transitions)
	require.Equal(t, 1, e.cloud.CreateCalls)

	// Deletion: deadline annotation, Node deleted and awaited, instance
	// deleted until not-found, finalizer removed.
	require.NoError(t, cp.Client.Delete(e.ctx, nc))
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	deadline, err := time.Parse(time.RFC3339, nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey])
	require.NoError(t, err)
	require.WithinDuration(t, nc.DeletionTimestamp.Add(time.Hour), deadline, time.Second)
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	require.False(t, node.DeletionTimestamp.IsZero(), "node is being deleted")
	require.Equal(t, 0, e.cloud.DeleteCalls, "instance stays until the node is gone")

	// Stand in for node termination.
	controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer)
	require.NoError(t, cp.Client.Update(e.ctx, node))
	res := e.reconcile(nc.Name)
	require.Equal(t, 5*time.Second, res.RequeueAfter)
	requireCondition(t, e.get(nc.Name), v1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating")
	e.reconcile(nc.Name)
	require.True(t, e.gone(nc.Name))
	require.False(t, e.cloud.Has(nc.Status.ProviderID))
}

// TestCreateOnceAcrossStatusConflicts loses the status write after a
// successful launch: the retry must reuse the launch, not buy another.
func TestCreateOnceAcrossStatusConflicts(t *testing.T) {
	e := newEnv(t)
	conflictStatusWrites(e, 1)
	nc := e.nodeClaim()

	_, err := e.ctrl.Reconcile(e.ctx, req(nc.Name))
	require.NoError(t, err) // a conflict requeues, it is not an error
	require.Equal(t, 1, e.cloud.CreateCalls)
	require.False(t, e.get(nc.Name).IsTrue(v1.ConditionTypeLaunched))
	require.Empty(t, e.logs.Matching("launched nodeclaim"), "nothing is logged for a launch that was not stored")

	for range 3 {
		e.reconcile(nc.Name)
	}
	nc = e.get(nc.Name)
	requireCondition(t, nc, v1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched")
	require.Equal(t, "fake:///"+nc.Name, nc.Status.ProviderID)
	require.Equal(t, 1, e.cloud.CreateCalls)
	require.Len(t, e.logs.Matching("launched nodeclaim"), 1)
}

// TestInsufficientCapacity deletes the NodeClaim and remembers the
// offering for three minutes.
func TestInsufficientCapacity(t *testing.T) {
	e := newEnv(t)
	key := cloudprovider.OfferingKey{InstanceType: "fake.large", Zone: "test-zone-a", CapacityType: "spot"}
	e.cloud.CreateErr = cloudprovider.NewInsufficientCapacityError(errors.New("no spot capacity"), key)
	nc := e.nodeClaim()

	e.reconcile(nc.Name)
	// Deleted; the finalizer is released at once since nothing launched.
	e.reconcile(nc.Name)
	require.True(t, e.gone(nc.Name))
	require.True(t, e.ctrl.Unavailable().IsUnavailable(key))
	require.Equal(t, []cloudprovider.OfferingKey{key}, e.ctrl.Unavailable().Keys())
	evs := e.events.Events("InsufficientCapacityError")
	require.Len(t, evs, 1)
	require.Equal(t, corev1.EventTypeWarning, evs[0].Type)
	require.Contains(t, evs[0].Message, "no spot capacity")

	e.clock.Step(3*time.Minute - time.Second)
	require.True(t, e.ctrl.Unavailable().IsUnavailable(key))
	e.clock.Step(time.Second)
	require.False(t, e.ctrl.Unavailable().IsUnavailable(key))
	require.Empty(t, e.ctrl.Unavailable().Keys())
}

func TestNodeClassNotReadyDeletes(t *testing.T) {
	e := newEnv(t)
	e.cloud.CreateErr = cloudprovider.NewNodeClassNotReadyError(errors.New("subnets not resolved"))
	nc := e.nodeClaim()
	e.reconcile(nc.Name)
	e.reconcile(nc.Name)
	require.True(t, e.gone(nc.Name))
	require.Len(t, e.events.Events("NodeClassNotReady"), 1)
}

// TestCreateErrorRetriesThenTimesOut keeps a NodeClaim whose launch fails
// with a retryable error, shows the provider's reason, and gives up after
// the launch timeout.
func TestCreateErrorRetriesThenTimesOut(t *testing.T) {
	e := newEnv(t)
	e.cloud.CreateErr = cloudprovider.NewCreateError(errors.New("boom"), "InjectedCreateError", "kwok was told to fail this launch")
	nc := e.nodeClaim()

	_, err := e.ctrl.Reconcile(e.ctx, req(nc.Name))
	require.Error(t, err)
	nc = e.get(nc.Name)
	requireCondition(t, nc, v1.ConditionTypeLaunched, metav1.ConditionUnknown, "InjectedCreateError")
	require.Equal(t, "kwok was told to fail this launch", nodeclaimCond(nc, v1.ConditionTypeLaunched).Message)

	e.clock.Step(4 * time.Minute)
	_, err = e.ctrl.Reconcile(e.ctx, req(nc.Name))
	require.Error(t, err)
	require.False(t, e.gone(nc.Name))

	e.clock.Step(time.Minute)
	_, _ = e.ctrl.Reconcile(e.ctx, req(nc.Name))
	e.reconcile(nc.Name) // finalize
	require.True(t, e.gone(nc.Name))
	require.Equal(t, 3, e.cloud.CreateCalls)
}

// TestRegistrationTimeout deletes a launched NodeClaim whose Node never
// appears, 15 minutes after registration started, and terminates its
// instance.
func TestRegistrationTimeout(t *testing.T) {
	e := newEnv(t)
	nc := e.nodeClaim()
	res := e.reconcile(nc.Name)
	require.InDelta(t, (15 * time.Minute).Seconds(), res.RequeueAfter.Seconds(), 1)
	id := e.get(nc.Name).Status.ProviderID

	e.clock.Step(14 * time.Minute)
	res = e.reconcile(nc.Name)
	require.InDelta(t, time.Minute.Seconds(), res.RequeueAfter.Seconds(), 1)
	require.False(t, e.gone(nc.Name))

	e.clock.Step(time.Minute)
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	require.False(t, nc.DeletionTimestamp.IsZero())
	require.Len(t, e.logs.Matching("terminating due to timeout"), 1)
	e.reconcile(nc.Name) // Delete starts termination
	e.reconcile(nc.Name) // ...and reports not-found
	require.True(t, e.gone(nc.Name))
	require.False(t, e.cloud.Has(id))
}

// TestManualNodeClaim handles a NodeClaim without a NodePool, and a Node
// that registered without the unregistered taint (an event, not a stall).
func TestManualNodeClaim(t *testing.T) {
	e := newEnv(t)
	nc := e.nodeClaim(func(nc *v1.NodeClaim) {
		nc.Labels = nil
		nc.Spec.StartupTaints = nil
		nc.Spec.Resources.Requests = nil
	})
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	node := e.kubeletNode(nc)
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	node.Spec.Taints = nil
	require.NoError(t, cp.Client.Update(e.ctx, node))
	e.setNodeReady(node)
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	requireCondition(t, nc, v1.ConditionTypeReady, metav1.ConditionTrue, "Ready")
	require.Len(t, e.events.Events("UnregisteredTaintMissing"), 1)
}

func TestInitializationWaitsForExtendedResources(t *testing.T) {
	e := newEnv(t)
	nc := e.nodeClaim(func(nc *v1.NodeClaim) {
		nc.Spec.StartupTaints = nil
		nc.Spec.Resources.Requests["nvidia.com/gpu"] = *resourceQ("1")
	})
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	node := e.kubeletNode(nc)
	e.setNodeReady(node)
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	requireCondition(t, nc, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "ResourceNotRegistered")

	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	node.Status.Allocatable["nvidia.com/gpu"] = *resourceQ("1")
	node.Status.Capacity["nvidia.com/gpu"] = *resourceQ("1")
	require.NoError(t, cp.Client.Status().Update(e.ctx, node))
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	require.NoError(t, cp.Client.Update(e.ctx, node))
	e.reconcile(nc.Name)
	requireCondition(t, e.get(nc.Name), v1.ConditionTypeInitialized, metav1.ConditionUnknown, "KnownEphemeralTaintsExist")

	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	node.Spec.Taints = removeTaint(node.Spec.Taints, corev1.TaintNodeNotReady)
	require.NoError(t, cp.Client.Update(e.ctx, node))
	e.reconcile(nc.Name)
	requireCondition(t, e.get(nc.Name), v1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized")
}

// conflictStatusWrites refuses the controller's first n status patches
// with a conflict, as a write based on a stale cache would be.
func conflictStatusWrites(e *env, n int) {
	var mu sync.Mutex
	e.intercept(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		mu.Lock()
		fail := n > 0
		if fail {
			n--
		}
		mu.Unlock()
		if fail {
			return apierrors.NewConflict(schema.GroupResource{Group: v1.Group, Resource: "nodeclaims"}, obj.GetName(), errors.New("injected"))
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}})
}

// TestFailedTerminationKeepsTheNodeClaim: a deleted NodeClaim whose
// instance the cloud will not terminate keeps its finalizer and says so
// with upstream's FailedTermination, and goes once the cloud complies.
func TestFailedTerminationKeepsTheNodeClaim(t *testing.T) {
	e := newEnv(t)
	nc := e.nodeClaim()
	e.reconcile(nc.Name)
	id := e.get(nc.Name).Status.ProviderID
	require.NotEmpty(t, id)
	e.cloud.Lock()
	e.cloud.DeleteErr = errors.New("UnauthorizedOperation: not allowed to terminate")
	e.cloud.Unlock()
	require.NoError(t, cp.Client.Delete(e.ctx, e.get(nc.Name)))

	_, err := e.ctrl.Reconcile(e.ctx, req(nc.Name))
	require.ErrorContains(t, err, "UnauthorizedOperation")
	failed := e.events.Events("FailedTermination")
	require.Len(t, failed, 1)
	require.Equal(t, "Failed to terminate instance "+id+", UnauthorizedOperation: not allowed to terminate", failed[0].Message)
	require.False(t, e.gone(nc.Name))

	e.cloud.Lock()
	e.cloud.DeleteErr = nil
	e.cloud.Unlock()
	e.reconcile(nc.Name) // Delete starts termination
	e.reconcile(nc.Name) // ...and reports not-found
	require.True(t, e.gone(nc.Name))
	require.False(t, e.cloud.Has(id))
}

// TestFinalizerDeletesUnregisteredNode: a NodeClaim deleted after its
// kubelet joined but before Registered was written still has its Node
// deleted, with the termination finalizer put on first so that the Node is
// drained, and the instance is terminated only once the Node is gone.
func TestFinalizerDeletesUnregisteredNode(t *testing.T) {
	e := newEnv(t)
	nc := e.nodeClaim()
	e.reconcile(nc.Name)
	nc = e.get(nc.Name)
	node := e.kubeletNode(nc) // joined; registration has not run
	requireCondition(t, nc, v1.ConditionTypeRegistered, metav1.ConditionUnknown, "NodeNotFound")
	require.NoError(t, cp.Client.Delete(e.ctx, nc))

	e.reconcile(nc.Name)
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
	require.False(t, node.DeletionTimestamp.IsZero(), "the Node found by provider id is deleted")
	require.True(t, controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer), "and drained by node termination")
	require.Equal(t, 0, e.cloud.DeleteCalls, "instance stays until the node is gone")
	require.False(t, e.gone(nc.Name))

	// Stand in for node termination.
	controllerutil.RemoveFinalizer(node, v1.TerminationFinalizer)
	require.NoError(t, cp.Client.Update(e.ctx, node))
	e.reconcile(nc.Name)
	e.reconcile(nc.Name)
	require.True(t, e.gone(nc.Name))
	require.False(t, e.cloud.Has(nc.Status.ProviderID))
}
