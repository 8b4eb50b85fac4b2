package lifecycle_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestRegistrationBesideAnotherWriter: another writer writes the Node
// between registration's read and its write. The Node's taints are an
// atomic list, which any patch replaces whole, so registration's write is
// refused when the taints changed since its read: it lands on the retry,
// keeping the other writer's taint. A write that leaves the taints alone
// (the kubelet's status heartbeat) does not refuse it: registration lands
// at once.
func TestRegistrationBesideAnotherWriter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meanwhile func(context.Context, client.Client, *corev1.Node) error
		refusals  int
	}{
		{name: "a taint", refusals: 1, meanwhile: func(ctx context.Context, c client.Client, n *corev1.Node) error {
			n.Spec.Taints = append(n.Spec.Taints, meanwhile)
			return c.Update(ctx, n)
		}},
		{name: "a heartbeat", refusals: 0, meanwhile: func(ctx context.Context, c client.Client, n *corev1.Node) error {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "Heartbeat", Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()})
			return c.Status().Update(ctx, n)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			nodes := raceNodeWrites(e, tc.meanwhile)
			nc := e.nodeClaim()
			e.reconcile(nc.Name) // launch
			node := e.kubeletNode(e.get(nc.Name))

			e.reconcile(nc.Name)
			_, _, refusals := nodes.counts()
			require.Equal(t, tc.refusals, refusals, "refused writes")
			if tc.refusals > 0 {
				e.reconcile(nc.Name) // the requeue
			}
			requireCondition(t, e.get(nc.Name), v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
			require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
			require.Equal(t, "true", node.Labels[v1.NodeRegisteredLabelKey])
			keys := taintKeys(node)
			if tc.refusals > 0 {
				require.Contains(t, keys, meanwhile.Key, "the other writer's taint survives")
			}
			require.Contains(t, keys, "example.com/special")
			require.NotContains(t, keys, v1.UnregisteredTaintKey)
		})
	}
}

// meanwhile is the taint the other writer adds.
var meanwhile = corev1.Taint{Key: "example.com/meanwhile", Effect: corev1.TaintEffectNoSchedule}

// raceNodeWrites has another writer write the Node (meanwhile) just before
// the controller's first patch of it, and tallies the controller's Node
// patches.
func raceNodeWrites(e *env, meanwhile func(context.Context, client.Client, *corev1.Node) error) *tally {
	var once sync.Once
	nodes := &tally{}
	e.intercept(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*corev1.Node); !ok {
			return c.Patch(ctx, obj, patch, opts...)
		}
		var raceErr error
		once.Do(func() {
			raceErr = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				current := &corev1.Node{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
					return err
				}
				return meanwhile(ctx, c, current)
			})
		})
		if raceErr != nil {
			return raceErr
		}
		return nodes.add(c.Patch(ctx, obj, patch, opts...))
	}})
	return nodes
}

// TestRegistrationBesidePodEvents: pod events write the NodeClaim's
// lastPodEventTime between registration's read and its status write. The
// write leaves the conditions alone, so it does not refuse registration's:
// the NodeClaim registers at once and keeps lastPodEventTime.
func TestRegistrationBesidePodEvents(t *testing.T) {
	e := newEnv(t)
	nc := e.nodeClaim()
	e.reconcile(nc.Name) // launch
	e.kubeletNode(e.get(nc.Name))
	statuses := racePodEvents(e)

	e.reconcile(nc.Name)
	writes, _, refusals := statuses.counts()
	require.NotZero(t, writes, "the controller wrote the status after the race")
	require.Zero(t, refusals, "refused status writes")
	got := e.get(nc.Name)
	requireCondition(t, got, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
	require.False(t, got.Status.LastPodEventTime.IsZero(), "the other writer's field stays")
}

// racePodEvents writes lastPodEventTime, as pod events do, just before the
// controller's first NodeClaim status patch, and tallies the controller's
// NodeClaim status patches.
func racePodEvents(e *env) *tally {
	var once sync.Once
	statuses := &tally{}
	e.intercept(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if _, ok := obj.(*v1.NodeClaim); !ok || sub != "status" {
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}
		var raceErr error
		once.Do(func() {
			current := &v1.NodeClaim{}
			if raceErr = c.Get(ctx, client.ObjectKeyFromObject(obj), current); raceErr != nil {
				return
			}
			current.Status.LastPodEventTime = metav1.Now()
			raceErr = c.Status().Update(ctx, current)
		})
		if raceErr != nil {
			return raceErr
		}
		return statuses.add(c.SubResource(sub).Patch(ctx, obj, patch, opts...))
	}})
	return statuses
}

// TestInitializationJudgesTheRegisteredNode: registration and
// initialization run in the same reconcile, while the cache still holds the
// Node as it was before registration's write (with the unregistered taint
// that write removed). Initialization judges the Node as registration left
// it: a Node with nothing left to wait for is Initialized in that same
// reconcile, and one still waiting says what for (not the unregistered
// taint), so one NodeClaim status write covers both; the Node is written
// once too, its initialized label in registration's write.
func TestInitializationJudgesTheRegisteredNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lift lifts the not-ready taint once the Node is Ready, as the
		// node lifecycle controller does.
		lift        bool
		initialized metav1.ConditionStatus
		reason      string
		message     string
	}{
		{name: "ready, nothing left", lift: true, initialized: metav1.ConditionTrue, reason: "Initialized"},
		{name: "ready, the not-ready taint still on", initialized: metav1.ConditionUnknown, reason: "KnownEphemeralTaintsExist",
			message: `KnownEphemeralTaint "node.kubernetes.io/not-ready:NoSchedule" still exists`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			nc := e.nodeClaim(func(nc *v1.NodeClaim) { nc.Spec.StartupTaints = nil })
			e.reconcile(nc.Name) // launch
			node := e.kubeletNode(e.get(nc.Name))
			lift := []string{"example.com/startup"}
			if tc.lift {
				lift = append(lift, corev1.TaintNodeNotReady)
			}
			e.readyWithout(node, lift...)
			registering := node.DeepCopy()

			// Node reads return the Node as it was before registration;
			// NodeClaim status writes are counted.
			var statusWrites tally
			nodeWrites := 0
			e.intercept(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, ok := obj.(*corev1.Node); ok {
						nodeWrites++
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
				List: listAsOf(registering),
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					return statusWrites.add(c.SubResource(sub).Patch(ctx, obj, patch, opts...))
				},
			})

			e.reconcile(nc.Name)
			got := e.get(nc.Name)
			requireCondition(t, got, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
			requireCondition(t, got, v1.ConditionTypeInitialized, tc.initialized, tc.reason)
			require.Equal(t, tc.message, got.Condition(v1.ConditionTypeInitialized).Message)
			writes, _, _ := statusWrites.counts()
			require.Equal(t, 1, writes, "one status write for registration and initialization")
			require.Equal(t, 1, nodeWrites, "one Node write for registration and initialization")
			require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node))
			require.Equal(t, "true", node.Labels[v1.NodeRegisteredLabelKey])
			_, labeled := node.Labels[v1.NodeInitializedLabelKey]
			require.Equal(t, tc.initialized == metav1.ConditionTrue, labeled, "initialized label")
			if tc.initialized == metav1.ConditionTrue {
				require.Equal(t, "true", node.Labels[v1.NodeInitializedLabelKey])
				require.NotEmpty(t, e.events.Events("Initialized"))
			}
		})
	}
}

// TestInitializationSkipsASupersededNode: a pass after registration reads
// the Node from a cache that has not delivered registration's write yet
// (the unregistered taint still on). Initialization does not judge that
// copy: the NodeClaim keeps the reason registration's pass wrote, with no
// status write, until the cache catches up.
func TestInitializationSkipsASupersededNode(t *testing.T) {
	e := newEnv(t)
	nc := e.nodeClaim(func(nc *v1.NodeClaim) { nc.Spec.StartupTaints = nil })
	e.reconcile(nc.Name) // launch
	node := e.kubeletNode(e.get(nc.Name))
	e.readyWithout(node, "example.com/startup")
	registering := node.DeepCopy()

	// Node reads return the Node as it was before registration; NodeClaim
	// status writes are counted.
	var statusWrites tally
	e.intercept(interceptor.Funcs{
		List: listAsOf(registering),
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return statusWrites.add(c.SubResource(sub).Patch(ctx, obj, patch, opts...))
		},
	})

	e.reconcile(nc.Name) // registration
	got := e.get(nc.Name)
	requireCondition(t, got, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
	requireCondition(t, got, v1.ConditionTypeInitialized, metav1.ConditionUnknown, "KnownEphemeralTaintsExist")
	want := got.Condition(v1.ConditionTypeInitialized).Message
	writes, _, _ := statusWrites.counts()
	require.Equal(t, 1, writes)

	e.reconcile(nc.Name) // the cache still has the Node registration wrote over
	got = e.get(nc.Name)
	require.Equal(t, want, got.Condition(v1.ConditionTypeInitialized).Message)
	writes, _, _ = statusWrites.counts()
	require.Equal(t, 1, writes, "no status write from the superseded Node")
}

// listAsOf is a List interceptor answering Node lists with node as it is
// now, whatever is written to it later: a cache that has not delivered
// those writes yet.
func listAsOf(node *corev1.Node) func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
	node = node.DeepCopy()
	return func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if l, ok := list.(*corev1.NodeList); ok {
			for i := range l.Items {
				if l.Items[i].Name == node.Name {
					node.DeepCopyInto(&l.Items[i])
				}
			}
		}
		return nil
	}
}
