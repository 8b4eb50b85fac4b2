package termination_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/node/termination"
)

// TestEventsOncePerChange: a drain blocked for several passes reports
// TerminationGracePeriodExpiring and FailedDraining once, and again only
// when what they say changes.
func TestEventsOncePerChange(t *testing.T) {
	e := newEnv(t)
	deadline := e.clock.Now().Add(time.Hour)
	_, node := e.managedNode(&deadline)
	e.pod(node, "guarded", labels("app", "guarded"))
	zero := intstr.FromInt32(0)
	require.NoError(t, cp.Client.Create(e.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: e.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}))
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	for range 4 {
		e.reconcile(node)
	}
	require.Len(t, e.events.Events("TerminationGracePeriodExpiring"), 1)
	failed := e.events.Events("FailedDraining")
	require.Len(t, failed, 1)
	require.Contains(t, failed[0].Message, e.ns+"/guarded")

	// A new blocker changes the message: one more event, then quiet again.
	e.pod(node, "pinned", annotations(v1.DoNotDisruptAnnotationKey, "true"))
	for range 3 {
		e.reconcile(node)
	}
	failed = e.events.Events("FailedDraining")
	require.Len(t, failed, 2)
	require.Contains(t, failed[1].Message, e.ns+"/pinned")
	require.Len(t, e.events.Events("TerminationGracePeriodExpiring"), 1, "the deadline did not change")
}

// TestAwaitingVolumeDetachmentOnce: waiting on the same attachments for
// several passes is one event.
func TestAwaitingVolumeDetachmentOnce(t *testing.T) {
	e := newEnv(t)
	_, node := e.managedNode(nil)
	for _, name := range []string{"a", "b"} {
		pv := "pv-" + name + "-" + node.Name
		require.NoError(t, cp.Client.Create(e.ctx, &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "va-" + name + "-" + node.Name},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: node.Name,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		}))
	}
	require.NoError(t, cp.Client.Delete(e.ctx, node))
	for range 4 {
		e.reconcile(node)
	}
	got := e.events.Events("AwaitingVolumeDetachment")
	require.Len(t, got, 1)
	require.Equal(t, "Awaiting deletion of 2 VolumeAttachments bound to node", got[0].Message)

	require.NoError(t, cp.Client.Delete(e.ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-a-" + node.Name}}))
	e.reconcile(node)
	e.reconcile(node)
	got = e.events.Events("AwaitingVolumeDetachment")
	require.Len(t, got, 2)
	require.Equal(t, "Awaiting deletion of 1 VolumeAttachments bound to node", got[1].Message)
}

// TestEvictionPanicIsRecovered: a panic inside an eviction goroutine fails
// the pass (logged with its stack) instead of killing the process; the next
// pass, with evictions working again, drains the node.
func TestEvictionPanicIsRecovered(t *testing.T) {
	e := newEnv(t)
	logs := &testutil.Logs{}
	ctx := logs.Context(e.ctx)
	panics := true
	base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
	require.NoError(t, err)
	kube := interceptor.NewClient(base, interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			if sub == "eviction" && panics {
				panic("injected eviction panic")
			}
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
	})
	// No Config: evictions go through the (intercepted) client.
	ctrl := termination.NewController(kube, e.cloud, termination.Options{Clock: e.clock, Recorder: e.events})
	_, node := e.managedNode(nil)
	e.pod(node, "app")
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}}
	_, err = ctrl.Reconcile(ctx, req)
	require.ErrorContains(t, err, "injected eviction panic")
	require.Len(t, logs.Matching("Observed a panic"), 1)
	require.Equal(t, []string{"app"}, e.podNames(e.ns))

	panics = false
	_, err = ctrl.Reconcile(ctx, req)
	require.NoError(t, err)
	require.Empty(t, e.podNames(e.ns))
}

// TestFailedTermination: a cloud that refuses to terminate the instance
// keeps the Node (and its finalizer), says so once with upstream's
// FailedTermination on the Node, and finishes once the cloud complies.
func TestFailedTermination(t *testing.T) {
	e := newEnv(t)
	nc, node := e.managedNode(nil)
	e.cloud.Lock()
	e.cloud.DeleteErr = errors.New("UnauthorizedOperation: not allowed to terminate")
	e.cloud.Unlock()
	require.NoError(t, cp.Client.Delete(e.ctx, node))

	for range 3 {
		_, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
		require.ErrorContains(t, err, "UnauthorizedOperation")
	}
	failed := e.events.Events("FailedTermination")
	require.Len(t, failed, 1, "once per change of its message")
	require.Equal(t, "Failed to terminate instance "+nc.Status.ProviderID+", UnauthorizedOperation: not allowed to terminate", failed[0].Message)
	require.Equal(t, node.Name, failed[0].Object)
	require.False(t, e.nodeGone(node))
	got := e.nodeClaim(nc.Name)
	require.True(t, got.IsTrue(v1.ConditionTypeDrained), "the drain is recorded though the instance is not terminated")
	require.Nil(t, got.Condition(v1.ConditionTypeInstanceTerminating))

	e.cloud.Lock()
	e.cloud.DeleteErr = nil
	e.cloud.Unlock()
	e.reconcile(node) // termination starts
	e.reconcile(node) // instance gone; finalizer removed
	require.True(t, e.nodeGone(node))
}
