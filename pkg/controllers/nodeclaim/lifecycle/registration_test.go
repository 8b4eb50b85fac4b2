package lifecycle_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			race := &nodeWriterRace{Client: cp.Client, meanwhile: tc.meanwhile}
			e.withClient(race)
			nc := e.nodeClaim()
			e.reconcile(nc.Name) // launch
			node := e.kubeletNode(e.get(nc.Name))

			e.reconcile(nc.Name)
			require.Equal(t, tc.refusals, race.refusals, "refused writes")
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

// nodeWriterRace has another writer write the Node just before the
// controller's first patch of it, and counts the patches the API server
// refuses (a conflict, or a JSON patch whose test failed).
type nodeWriterRace struct {
	client.Client
	meanwhile func(context.Context, client.Client, *corev1.Node) error
	mu        sync.Mutex
	raced     bool
	refusals  int
}

func (c *nodeWriterRace) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.Node); !ok {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.raced {
		c.raced = true
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current := &corev1.Node{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
				return err
			}
			return c.meanwhile(ctx, c.Client, current)
		}); err != nil {
			return err
		}
	}
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		c.refusals++
	}
	return err
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
	race := &podEventsRace{Client: cp.Client}
	e.withClient(race)

	e.reconcile(nc.Name)
	require.True(t, race.raced)
	require.Zero(t, race.refusals, "refused status writes")
	got := e.get(nc.Name)
	requireCondition(t, got, v1.ConditionTypeRegistered, metav1.ConditionTrue, "Registered")
	require.False(t, got.Status.LastPodEventTime.IsZero(), "the other writer's field stays")
}

// podEventsRace writes lastPodEventTime just before the controller's first
// NodeClaim status patch, and counts the status patches the API server
// refuses.
type podEventsRace struct {
	client.Client
	mu       sync.Mutex
	raced    bool
	refusals int
}

func (c *podEventsRace) Status() client.SubResourceWriter {
	return &podEventsWriter{SubResourceWriter: c.Client.Status(), parent: c}
}

type podEventsWriter struct {
	client.SubResourceWriter
	parent *podEventsRace
}

func (w *podEventsWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, ok := obj.(*v1.NodeClaim); !ok {
		return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	}
	w.parent.mu.Lock()
	defer w.parent.mu.Unlock()
	if !w.parent.raced {
		w.parent.raced = true
		current := &v1.NodeClaim{}
		if err := w.parent.Client.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
			return err
		}
		current.Status.LastPodEventTime = metav1.Now()
		if err := w.parent.Client.Status().Update(ctx, current); err != nil {
			return err
		}
	}
	err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		w.parent.refusals++
	}
	return err
}
