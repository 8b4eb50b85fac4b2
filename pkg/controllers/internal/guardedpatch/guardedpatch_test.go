package guardedpatch_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

var (
	startup = corev1.Taint{Key: "example.com/startup", Effect: corev1.TaintEffectNoSchedule}
	other   = corev1.Taint{Key: "example.com/other", Effect: corev1.TaintEffectNoExecute}
)

// TestPatch reads a Node, lets another writer change it, then patches
// what it read: a write to what the patch does not replace (the status, a
// label) lands beside it; a change to a list it replaces (taints,
// finalizers) refuses it as a Conflict and the other writer's entry stays.
func TestPatch(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name      string
		taints    []corev1.Taint
		meanwhile func(*corev1.Node)
		status    bool
		change    func(*corev1.Node)
		conflict  bool
		untainted bool
		// bare Nodes have no annotations: a first one adds the map whole,
		// under the resourceVersion lock.
		bare  bool
		check func(*testing.T, *corev1.Node)
	}{
		{
			name: "a heartbeat, then a taint removed and a label added", taints: []corev1.Taint{startup},
			meanwhile: func(n *corev1.Node) {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
			},
			status: true,
			change: func(n *corev1.Node) { n.Spec.Taints = nil; n.Labels["ours"] = "yes" },
			check: func(t *testing.T, n *corev1.Node) {
				assert.Empty(t, n.Spec.Taints)
				assert.Equal(t, "yes", n.Labels["ours"])
				assert.Len(t, n.Status.Conditions, 1, "the heartbeat stays")
			},
		},
		{
			name: "a label, then a finalizer, an owner and unschedulable", taints: []corev1.Taint{startup},
			meanwhile: func(n *corev1.Node) { n.Labels["theirs"] = "yes" },
			change: func(n *corev1.Node) {
				n.Finalizers = append(n.Finalizers, "example.com/ours")
				n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "uid-owner"}}
				n.Spec.Unschedulable = true
				n.Annotations["example.com/note"] = "d"
			},
			check: func(t *testing.T, n *corev1.Node) {
				assert.Equal(t, "yes", n.Labels["theirs"])
				assert.Equal(t, []string{"example.com/ours"}, n.Finalizers)
				assert.Len(t, n.OwnerReferences, 1)
				assert.True(t, n.Spec.Unschedulable)
				assert.Equal(t, "d", n.Annotations["example.com/note"])
			},
		},
		{
			name: "a taint, then a taint removed", taints: []corev1.Taint{startup},
			meanwhile: func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, other) },
			change:    func(n *corev1.Node) { n.Spec.Taints = nil },
			conflict:  true,
			check:     func(t *testing.T, n *corev1.Node) { assert.Contains(t, n.Spec.Taints, other) },
		},
		{
			name:      "a first taint, then a taint added to none",
			meanwhile: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{other} },
			// The API server's admission taints a new Node not-ready; the
			// patch reads it without.
			untainted: true,
			change:    func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{startup} },
			conflict:  true,
			check:     func(t *testing.T, n *corev1.Node) { assert.Equal(t, []corev1.Taint{other}, n.Spec.Taints) },
		},
		{
			name: "a heartbeat, then a first annotation", bare: true, status: true,
			meanwhile: func(n *corev1.Node) {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
			},
			change:   func(n *corev1.Node) { n.Annotations = map[string]string{"example.com/note": "d"} },
			conflict: true,
			check:    func(t *testing.T, n *corev1.Node) { assert.Empty(t, n.Annotations) },
		},
		{
			name:      "a finalizer, then a finalizer added",
			meanwhile: func(n *corev1.Node) { n.Finalizers = []string{"example.com/theirs"} },
			change:    func(n *corev1.Node) { n.Finalizers = []string{"example.com/ours"} },
			conflict:  true,
			check: func(t *testing.T, n *corev1.Node) {
				assert.Equal(t, []string{"example.com/theirs"}, n.Finalizers)
				n.Finalizers = nil
				require.NoError(t, cp.Client.Update(ctx, n))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "guardedpatch-" + string(rune('a'+i)), Labels: map[string]string{"kept": "yes"}},
				Spec: corev1.NodeSpec{Taints: tc.taints}}
			if !tc.bare {
				node.Annotations = map[string]string{"kept": "yes"}
			}
			require.NoError(t, cp.Client.Create(ctx, node))
			defer func() { _ = cp.Client.Delete(ctx, node) }()
			if tc.untainted {
				node.Spec.Taints = nil
				require.NoError(t, cp.Client.Update(ctx, node))
			}
			stored := node.DeepCopy()

			theirs := node.DeepCopy()
			tc.meanwhile(theirs)
			if tc.status {
				require.NoError(t, cp.Client.Status().Update(ctx, theirs))
			} else {
				require.NoError(t, cp.Client.Update(ctx, theirs))
			}

			ours := stored.DeepCopy()
			tc.change(ours)
			err := guardedpatch.Patch(ctx, cp.Client, stored, ours)
			if tc.conflict {
				require.True(t, apierrors.IsConflict(err), "want a conflict, got %v", err)
			} else {
				require.NoError(t, err)
			}
			got := &corev1.Node{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(node), got))
			assert.Equal(t, "yes", got.Labels["kept"])
			tc.check(t, got)
		})
	}
}

// TestPatchStatus writes a NodeClaim's status as the lifecycle does
// while pod events write lastPodEventTime and other controllers their
// conditions: a write beside ours lands with it; a change to the
// conditions list ours replaces refuses ours as a Conflict.
func TestPatchStatus(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i, tc := range []struct {
		name      string
		meanwhile func(*v1.NodeClaim)
		conflict  bool
	}{
		{name: "lastPodEventTime", meanwhile: func(nc *v1.NodeClaim) { nc.Status.LastPodEventTime = now }},
		{name: "a condition", conflict: true, meanwhile: func(nc *v1.NodeClaim) {
			nc.Status.Conditions = append(nc.Status.Conditions, v1.Condition{Type: "Drifted", Status: metav1.ConditionTrue, Reason: "Drifted", LastTransitionTime: now})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guardedpatch-%d", i)}, Spec: v1.NodeClaimSpec{
				NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
				Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/os", Operator: "In", Values: []string{"linux"}}},
			}}
			require.NoError(t, cp.Client.Create(ctx, nc))
			defer func() { _ = cp.Client.Delete(ctx, nc) }()
			nc.Status.Conditions = []v1.Condition{{Type: "Launched", Status: metav1.ConditionUnknown, Reason: "Unknown", LastTransitionTime: now}}
			require.NoError(t, cp.Client.Status().Update(ctx, nc))
			stored := nc.DeepCopy()

			theirs := nc.DeepCopy()
			tc.meanwhile(theirs)
			require.NoError(t, cp.Client.Status().Update(ctx, theirs))

			ours := stored.DeepCopy()
			ours.Status.ProviderID = "kwok://guarded"
			ours.Status.Conditions[0].Status, ours.Status.Conditions[0].Reason = metav1.ConditionTrue, "Launched"
			err := guardedpatch.PatchStatus(ctx, cp.Client, stored, ours)
			got := &v1.NodeClaim{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(nc), got))
			if tc.conflict {
				require.True(t, apierrors.IsConflict(err), "want a conflict, got %v", err)
				assert.Empty(t, got.Status.ProviderID)
				assert.Len(t, got.Status.Conditions, 2, "the other writer's condition stays")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "kwok://guarded", got.Status.ProviderID)
			assert.Equal(t, now.Unix(), got.Status.LastPodEventTime.Unix(), "the other writer's field stays")
			require.Len(t, got.Status.Conditions, 1)
			assert.Equal(t, metav1.ConditionTrue, got.Status.Conditions[0].Status)
		})
	}
}

// TestOwnWriteRefusesAtOnce writes a Node twice from the same read, as a
// controller reading a cache that has not delivered its own first write
// yet does: a second write testing a list the first replaced, or locked
// on the version, is refused as a Conflict without a request (the server
// would refuse it); one that tests nothing the first replaced is sent and
// lands.
func TestOwnWriteRefusesAtOnce(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name string
		bare bool
		// recorded, when set, is a merge patch before first, told to the
		// ledger with Record; first then writes from the version it made.
		recorded, first, second func(*corev1.Node)
		status                  bool
		refused                 bool
	}{
		{
			name:     "a recorded label, a taint removed, then a taint added from before the label",
			recorded: func(n *corev1.Node) { n.Labels["theirs"] = "yes" },
			first:    func(n *corev1.Node) { n.Spec.Taints = nil },
			second:   func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, other) },
			refused:  true,
		},
		{
			name:    "a taint removed, then a taint added",
			first:   func(n *corev1.Node) { n.Spec.Taints = nil },
			second:  func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, other) },
			refused: true,
		},
		{
			name:   "a taint removed, then a finalizer added",
			first:  func(n *corev1.Node) { n.Spec.Taints = nil },
			second: func(n *corev1.Node) { n.Finalizers = []string{"example.com/ours"} },
		},
		{
			name:   "a label, then a taint removed",
			first:  func(n *corev1.Node) { n.Labels["ours"] = "yes" },
			second: func(n *corev1.Node) { n.Spec.Taints = nil },
		},
		{
			name:    "a label, then a first annotation (locked on the version)",
			bare:    true,
			first:   func(n *corev1.Node) { n.Labels["ours"] = "yes" },
			second:  func(n *corev1.Node) { n.Annotations = map[string]string{"example.com/note": "d"} },
			refused: true,
		},
		{
			name: "a status condition, then another",
			first: func(n *corev1.Node) {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			},
			second: func(n *corev1.Node) {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}
			},
			status:  true,
			refused: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, sent := countingClient(t)
			patch := guardedpatch.Patch
			if tc.status {
				patch = guardedpatch.PatchStatus
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guardedpatch-own-%d", i), Labels: map[string]string{"kept": "yes"}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{startup}}}
			if !tc.bare {
				node.Annotations = map[string]string{"kept": "yes"}
			}
			createNode(ctx, t, node)
			stored := node.DeepCopy()

			from, want := stored, 1
			if tc.recorded != nil {
				merged := stored.DeepCopy()
				tc.recorded(merged)
				require.NoError(t, kube.Patch(ctx, merged, client.MergeFrom(stored)))
				guardedpatch.Record(stored, merged)
				from, want = merged, 2
			}
			first := from.DeepCopy()
			tc.first(first)
			require.NoError(t, patch(ctx, kube, from, first))
			require.Equal(t, want, *sent)

			second := stored.DeepCopy()
			tc.second(second)
			err := patch(ctx, kube, stored, second)
			if tc.refused {
				require.True(t, apierrors.IsConflict(err), "want a conflict, got %v", err)
				assert.Equal(t, want, *sent, "a write the server would refuse is not sent")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want+1, *sent)
		})
	}
}

// TestOwnWritesFromOneVersion: two of our writes from the same version
// both land, one from a cache that had not delivered the other (a merge
// patch of one field, told to the ledger with Record). A third write then
// replaces a list from the version the stale write made. A write from the
// version the first write made is behind the third too: when it tests the
// list the third replaced it is refused without a request; when not, it
// is sent and lands.
func TestOwnWritesFromOneVersion(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name    string
		third   func(*corev1.Node)
		refused bool
	}{
		{name: "the third adds a taint", third: func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, other) }, refused: true},
		{name: "the third adds a finalizer", third: func(n *corev1.Node) { n.Finalizers = []string{"example.com/ours"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, sent := countingClient(t)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guardedpatch-one-version-%d", i),
				Labels: map[string]string{"kept": "yes"}, Annotations: map[string]string{"kept": "yes"}},
				// The provider ID keeps the spec from being empty once the
				// taints are gone: a spec added whole is locked on the version.
				Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("example:///one-version-%d", i), Taints: []corev1.Taint{startup}}}
			createNode(ctx, t, node)
			stored := node.DeepCopy()

			first := stored.DeepCopy()
			first.Spec.Taints = nil
			require.NoError(t, guardedpatch.Patch(ctx, kube, stored, first))
			stale := stored.DeepCopy()
			stale.Labels["theirs"] = "yes"
			require.NoError(t, kube.Patch(ctx, stale, client.MergeFrom(stored)))
			guardedpatch.Record(stored, stale)
			third := stale.DeepCopy()
			third.Spec.Taints = first.Spec.Taints
			fromThird := third.DeepCopy()
			tc.third(third)
			require.NoError(t, guardedpatch.Patch(ctx, kube, fromThird, third))
			require.Equal(t, 3, *sent)

			second := first.DeepCopy()
			second.Spec.Taints = []corev1.Taint{startup}
			err := guardedpatch.Patch(ctx, kube, first, second)
			if tc.refused {
				require.True(t, apierrors.IsConflict(err), "want a conflict, got %v", err)
				assert.Equal(t, 3, *sent, "a write the server would refuse is not sent")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 4, *sent)
		})
	}
}

// TestOwnWritesRecordedOutOfOrder: two merge patches from the same version
// are told to the ledger in the reverse of the order they landed in (two
// controllers' writes racing). A write locked on the version the earlier
// one made is still refused without a request: the later one came after it.
func TestOwnWritesRecordedOutOfOrder(t *testing.T) {
	ctx := context.Background()
	kube, sent := countingClient(t)
	// Bare: a first annotation is added as a map, locked on the version.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "guardedpatch-out-of-order", Labels: map[string]string{"kept": "yes"}},
		Spec: corev1.NodeSpec{ProviderID: "example:///out-of-order"}}
	createNode(ctx, t, node)
	stored := node.DeepCopy()

	earlier, later := stored.DeepCopy(), stored.DeepCopy()
	earlier.Labels["earlier"] = "yes"
	later.Labels["later"] = "yes"
	require.NoError(t, kube.Patch(ctx, earlier, client.MergeFrom(stored)))
	require.NoError(t, kube.Patch(ctx, later, client.MergeFrom(stored)))
	guardedpatch.Record(stored, later)
	guardedpatch.Record(stored, earlier)

	annotated := earlier.DeepCopy()
	annotated.Annotations = map[string]string{"example.com/note": "d"}
	err := guardedpatch.Patch(ctx, kube, earlier, annotated)
	require.True(t, apierrors.IsConflict(err), "want a conflict, got %v", err)
	assert.Equal(t, 2, *sent, "a write the server would refuse is not sent")
}

// countingClient is a client of the control plane that counts the patches
// it sends, of the object and of its subresources: a write the ledger
// refuses must not reach the server.
func countingClient(t *testing.T) (client.Client, *int) {
	t.Helper()
	base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
	require.NoError(t, err)
	sent := new(int)
	kube := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			*sent++
			return c.Patch(ctx, obj, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			*sent++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	return kube, sent
}

// createNode creates node and removes it, finalizers first, when the test
// ends.
func createNode(ctx context.Context, t *testing.T, node *corev1.Node) {
	t.Helper()
	require.NoError(t, cp.Client.Create(ctx, node))
	t.Cleanup(func() {
		got := &corev1.Node{}
		if cp.Client.Get(ctx, client.ObjectKeyFromObject(node), got) == nil && len(got.Finalizers) > 0 {
			got.Finalizers = nil
			_ = cp.Client.Update(ctx, got)
		}
		_ = cp.Client.Delete(ctx, node)
	})
}

// TestSuperseded: the version a write of ours replaced is superseded; the
// version it made, and a version of an object we never wrote, are not.
func TestSuperseded(t *testing.T) {
	ctx := context.Background()
	kube, _ := countingClient(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "guardedpatch-superseded", Labels: map[string]string{"kept": "yes"}},
		Spec: corev1.NodeSpec{ProviderID: "example:///superseded", Taints: []corev1.Taint{startup}}}
	createNode(ctx, t, node)
	stored := node.DeepCopy()
	require.False(t, guardedpatch.Superseded(stored), "not written yet")

	written := stored.DeepCopy()
	written.Spec.Taints = nil
	require.NoError(t, guardedpatch.Patch(ctx, kube, stored, written))
	assert.True(t, guardedpatch.Superseded(stored), "the version written over")
	assert.False(t, guardedpatch.Superseded(written), "the version written")
}
