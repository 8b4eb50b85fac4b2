package podevents_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/podevents"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func TestEventNode(t *testing.T) {
	now := metav1.Now()
	pod := func(node string, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	tests := []struct {
		name     string
		old, cur *corev1.Pod
		want     string
	}{
		{"bound", pod("", corev1.PodPending, false), pod("n1", corev1.PodPending, false), "n1"},
		{"still pending", pod("", corev1.PodPending, false), pod("", corev1.PodPending, false), ""},
		{"started running: not an event", pod("n1", corev1.PodPending, false), pod("n1", corev1.PodRunning, false), ""},
		{"succeeded", pod("n1", corev1.PodRunning, false), pod("n1", corev1.PodSucceeded, false), "n1"},
		{"failed", pod("n1", corev1.PodRunning, false), pod("n1", corev1.PodFailed, false), "n1"},
		{"already terminal", pod("n1", corev1.PodFailed, false), pod("n1", corev1.PodFailed, false), ""},
		{"started terminating", pod("n1", corev1.PodRunning, false), pod("n1", corev1.PodRunning, true), "n1"},
		{"still terminating", pod("n1", corev1.PodRunning, true), pod("n1", corev1.PodRunning, true), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, podevents.EventNode(tt.old, tt.cur))
		})
	}
}

// TestLastPodEventTime: a pod event stamps the node's NodeClaim; another
// within 10 s changes nothing; one after that stamps it again.
func TestLastPodEventTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	name := launchedNode(ctx, t)

	c := podevents.NewController(cp.Client, clk)
	stamp := func() time.Time {
		t.Helper()
		_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		require.NoError(t, err)
		got := &v1.NodeClaim{}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, got))
		return got.Status.LastPodEventTime.Time
	}
	first := stamp()
	require.True(t, first.Equal(clk.Now()), "stamped with the event's time: %s", first)

	clk.Step(podevents.DedupeTimeout - time.Second)
	require.True(t, stamp().Equal(first), "deduplicated within 10s")

	clk.Step(time.Second)
	require.True(t, stamp().Equal(clk.Now()), "stamped again after 10s")

	// A node without a NodeClaim, or no node at all, is not an error.
	require.NoError(t, cp.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-unmanaged"}}))
	_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name + "-unmanaged"}})
	require.NoError(t, err)
	_, err = c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "missing"}})
	require.NoError(t, err)
}

// TestStaleCacheDoesNotRestamp: pods bind to a busy node faster than the
// cache delivers the NodeClaim's stamp, so the next event may read the
// NodeClaim as it was before it. Within 10 s of the stamp that event
// writes nothing; after them it stamps again.
func TestStaleCacheDoesNotRestamp(t *testing.T) {
	tests := []struct {
		name   string
		after  time.Duration
		writes int
	}{
		{"within 10s of the stamp", podevents.DedupeTimeout - time.Second, 0},
		{"10s after the stamp", podevents.DedupeTimeout, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
			name := launchedNode(ctx, t)

			// The cache serves the NodeClaim as it was before any stamp
			// once stale is set; the status patches are counted.
			var mu sync.Mutex
			var stale *v1.NodeClaim
			writes := 0
			base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
			require.NoError(t, err)
			kube := interceptor.NewClient(base, interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if err := c.List(ctx, list, opts...); err != nil {
						return err
					}
					mu.Lock()
					defer mu.Unlock()
					if l, ok := list.(*v1.NodeClaimList); ok && stale != nil {
						for i := range l.Items {
							if l.Items[i].Name == stale.Name {
								stale.DeepCopyInto(&l.Items[i])
							}
						}
					}
					return nil
				},
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					mu.Lock()
					writes++
					mu.Unlock()
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			before := &v1.NodeClaim{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, before))

			c := podevents.NewController(kube, clk)
			reconcileNode := func() {
				t.Helper()
				_, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
				require.NoError(t, err)
			}
			reconcileNode()
			require.Equal(t, 1, writes, "the first event stamps")

			mu.Lock()
			stale, writes = before, 0
			mu.Unlock()
			clk.Step(tt.after)
			reconcileNode()
			require.Equal(t, tt.writes, writes)
			got := &v1.NodeClaim{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, got))
			want := clk.Now().Add(-tt.after)
			if tt.writes > 0 {
				want = clk.Now()
			}
			require.True(t, got.Status.LastPodEventTime.Time.Equal(want), "lastPodEventTime %s, want %s", got.Status.LastPodEventTime, want)
		})
	}
}

// launchedNode creates a NodeClaim with a provider ID and its Node, both
// named after the returned name, as the lifecycle leaves them once the
// Node has registered; mutate, when given, changes the NodeClaim before it
// is created.
func launchedNode(ctx context.Context, t *testing.T, mutate ...func(*v1.NodeClaim)) string {
	t.Helper()
	name := testutil.UniqueName("node")
	providerID := "fake:///" + name
	nc := testutil.SpotNodeClaim(name)
	for _, m := range mutate {
		m(nc)
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	nc.Status.ProviderID = providerID
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	require.NoError(t, cp.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}))
	return name
}

// TestStampEndsConsolidatable: a stamp restarts consolidateAfter, so it
// removes a Consolidatable condition in its own write (one status write
// where the stamp and the disruption conditions controller's removal were
// two) when its pool's consolidateAfter has not passed since the stamp;
// with consolidateAfter 0s the condition stays. When the conditions
// changed on the server since the read, the guarded write is refused and
// the stamp goes alone.
func TestStampEndsConsolidatable(t *testing.T) {
	tests := []struct {
		name             string
		consolidateAfter string
		// changed: another writer changes the conditions after the read.
		changed            bool
		writes             int
		wantConsolidatable bool
	}{
		{"consolidateAfter 30s: removed in the stamp's write", "30s", false, 1, false},
		{"consolidateAfter 0s: kept", "0s", false, 1, true},
		{"conditions changed since the read: the stamp alone", "30s", true, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
			np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("pool")}}
			np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			}
			np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration(tt.consolidateAfter)
			require.NoError(t, cp.Client.Create(ctx, np))
			t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), np) })
			name := launchedNode(ctx, t, func(nc *v1.NodeClaim) { nc.Labels = map[string]string{v1.NodePoolLabelKey: np.Name} })
			nc := &v1.NodeClaim{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, nc))
			nc.SetCondition(clk.Now().Add(-time.Minute), v1.ConditionTypeInitialized, "True", "", "")
			nc.SetCondition(clk.Now().Add(-time.Minute), v1.ConditionTypeConsolidatable, "True", "", "")
			require.NoError(t, cp.Client.Status().Update(ctx, nc))

			// The status patches are counted; with changed, the first one
			// is preceded by another writer's condition.
			writes := 0
			base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
			require.NoError(t, err)
			kube := interceptor.NewClient(base, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if writes == 0 && tt.changed {
						other := &v1.NodeClaim{}
						require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, other))
						other.SetCondition(clk.Now(), "Other", "True", "", "")
						require.NoError(t, cp.Client.Status().Update(ctx, other))
					}
					writes++
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			c := podevents.NewController(kube, clk)
			_, err = c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			require.NoError(t, err)
			require.Equal(t, tt.writes, writes)
			got := &v1.NodeClaim{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, got))
			require.True(t, got.Status.LastPodEventTime.Time.Equal(clk.Now()), "stamped: %s", got.Status.LastPodEventTime)
			require.Equal(t, tt.wantConsolidatable, got.Condition(v1.ConditionTypeConsolidatable) != nil)
			require.NotNil(t, got.Condition(v1.ConditionTypeInitialized), "the other conditions stay")
			if tt.changed {
				require.NotNil(t, got.Condition("Other"), "another writer's condition stays")
			}
		})
	}
}
