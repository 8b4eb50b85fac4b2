package disruption_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	pure "github.com/karpenter-go/karpenter/pkg/disruption"
)

// TestDisruptionReasonBesideLastPodEventTime: the disruption queue reads
// NodeClaims from the informer's cache, which may not have seen another
// writer's lastPodEventTime yet. Setting or clearing DisruptionReason from
// such a read lands beside that write and keeps it: only a changed
// conditions list may refuse it.
func TestDisruptionReasonBesideLastPodEventTime(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         []nodeOpt
		reason, want string
	}{
		{name: "set", reason: string(v1.DisruptionReasonDrifted), want: string(v1.DisruptionReasonDrifted)},
		{name: "cleared", opts: []nodeOpt{conditionOpt(v1.ConditionTypeDisruptionReason)}, reason: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, "100%")
			nc, _ := e.managedNode(tc.opts...)
			stale := e.nodeClaim(nc.Name)

			// Another writer (pod events) moves the NodeClaim on.
			theirs := stale.DeepCopy()
			theirs.Status.LastPodEventTime = metav1.NewTime(e.clock.Now())
			require.NoError(t, cp.Client.Status().Update(e.ctx, theirs))

			// Our reads still return the version before it, as a
			// lagging cache does.
			base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
			require.NoError(t, err)
			kube := interceptor.NewClient(base, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if out, ok := obj.(*v1.NodeClaim); ok && key.Name == stale.Name {
						stale.DeepCopyInto(out)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			require.NoError(t, disruption.SetDisruptionReason(e.ctx, kube, nc.Name, tc.reason))

			got := e.nodeClaim(nc.Name)
			assert.Equal(t, tc.want, disruptionReason(got))
			assert.False(t, got.Status.LastPodEventTime.IsZero(), "the other writer's lastPodEventTime stays")
		})
	}
}

// TestDisruptedTaintWhileTheCacheLags: the planner's drain taint, written
// by this process, reaches the informer's cache some time later; a drift
// command that takes the Node before then reads the taints without it.
// guardedpatch refuses that write (it would drop our own taint), and the
// command must not fail for it: the write is retried until the cache has
// caught up, and the Node ends with both taints.
func TestDisruptedTaintWhileTheCacheLags(t *testing.T) {
	e := newEnv(t, nil, "100%")
	_, node := e.managedNode()
	before := e.node(node.Name)
	require.NoError(t, disruption.SetTaint(e.ctx, cp.Client, node.Name, pure.DrainTaint, true))

	// Reads return the version before our drain taint for 600ms from the
	// first read, and at least twice: a lagging cache, as a loaded API
	// server's watch is at 1,000 nodes. The window opens at the first read
	// and counts reads too, so that a stall of the machine cannot shorten
	// the lag the write must outlast.
	base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
	require.NoError(t, err)
	var caughtUp time.Time
	stale := 0
	kube := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok && key.Name == node.Name && caughtUp.IsZero() {
				caughtUp = time.Now().Add(600 * time.Millisecond)
			}
			if out, ok := obj.(*corev1.Node); ok && key.Name == node.Name && (stale < 2 || time.Now().Before(caughtUp)) {
				stale++
				before.DeepCopyInto(out)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	require.NoError(t, disruption.SetTaint(e.ctx, kube, node.Name, v1.DisruptedNoScheduleTaint, true))
	require.Greater(t, stale, 1, "the write was retried from the stale copy")

	got := e.node(node.Name)
	var keys []string
	for _, taint := range got.Spec.Taints {
		keys = append(keys, taint.Key)
	}
	assert.Contains(t, keys, pure.DrainTaint.Key, "our drain taint stays")
	assert.Contains(t, keys, v1.DisruptedNoScheduleTaint.Key)
}
