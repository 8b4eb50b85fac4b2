package health_test

import (
	"context"
	"os"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/node/health"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

type policies []cloudprovider.RepairPolicy

func (p policies) RepairPolicies() []cloudprovider.RepairPolicy { return p }

const toleration = 10 * time.Minute

// kwokPolicies mirror the kwok provider's: Ready False or Unknown.
var kwokPolicies = policies{
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: toleration},
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: toleration},
}

// holdFinalizer keeps a deleted NodeClaim visible so the test can read it.
const holdFinalizer = "test.karpenter-go.io/hold"

type env struct {
	t      *testing.T
	ctx    context.Context
	clock  *clocktesting.FakeClock
	events *testutil.Recorder
	ctrl   *health.Controller
	pool   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), events: &testutil.Recorder{}, pool: testutil.UniqueName("pool")}
	e.ctrl = health.NewController(cp.Client, kwokPolicies, e.clock, e.events)
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: e.pool}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	require.NoError(t, cp.Client.Create(ctx, np))
	t.Cleanup(func() {
		ctx := context.Background()
		list := &v1.NodeClaimList{}
		require.NoError(t, cp.Client.List(ctx, list))
		for i := range list.Items {
			nc := &list.Items[i]
			nc.Finalizers = nil
			require.NoError(t, client.IgnoreNotFound(cp.Client.Update(ctx, nc)))
		}
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodeClaim{}))
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &corev1.Node{}))
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodePool{}))
	})
	return e
}

// node creates a registered NodeClaim and its Node with Ready at status
// since the given time before now.
func (e *env) node(ready corev1.ConditionStatus, since time.Duration) (*corev1.Node, *v1.NodeClaim) {
	e.t.Helper()
	name := testutil.UniqueName(e.pool)
	labels := map[string]string{v1.NodePoolLabelKey: e.pool, v1.CapacityTypeLabelKey: "spot"}
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{holdFinalizer}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
			NodeClassRef: &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"},
		},
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, nc))
	nc.Status.ProviderID = "fake:///" + name
	nc.Status.ImageID = "image-1"
	nc.Status.NodeName = name
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, nc))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, node))
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: ready, Reason: "Test",
		LastTransitionTime: metav1.NewTime(e.clock.Now().Add(-since)),
	}}
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, node))
	return node, nc
}

func (e *env) reconcile(node *corev1.Node) reconcile.Result {
	e.t.Helper()
	res, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
	require.NoError(e.t, err)
	return res
}

func (e *env) get(nc *v1.NodeClaim) *v1.NodeClaim {
	e.t.Helper()
	got := &v1.NodeClaim{}
	require.NoError(e.t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(nc), got))
	return got
}

func unhealthyDisrupted(t *testing.T, pool string) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, metrics.NodeClaimsUnhealthyDisruptedTotal.WithLabelValues("ready", pool, "spot", "image-1").Write(m))
	return m.GetCounter().GetValue()
}

func TestRepairAfterToleration(t *testing.T) {
	for _, status := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionUnknown} {
		t.Run(string(status), func(t *testing.T) {
			e := newEnv(t)
			for range 4 {
				e.node(corev1.ConditionTrue, time.Hour)
			}
			node, nc := e.node(status, 4*time.Minute)

			res := e.reconcile(node)
			assert.Equal(t, 6*time.Minute, res.RequeueAfter, "requeued at the end of the toleration")
			assert.True(t, e.get(nc).DeletionTimestamp.IsZero(), "not before the toleration ends")

			e.clock.Step(6 * time.Minute)
			before := unhealthyDisrupted(t, e.pool)
			res = e.reconcile(node)
			assert.Zero(t, res.RequeueAfter)
			got := e.get(nc)
			require.False(t, got.DeletionTimestamp.IsZero(), "the NodeClaim is deleted")
			assert.Equal(t, e.clock.Now().Format(time.RFC3339), got.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey],
				"the termination deadline is now: drain ignores PDBs and do-not-disrupt")
			assert.Equal(t, 1.0, unhealthyDisrupted(t, e.pool)-before)
			assert.Empty(t, e.events.Events(health.EventNodeRepairBlocked))

			e.reconcile(node)
			assert.Equal(t, 1.0, unhealthyDisrupted(t, e.pool)-before, "a deleting NodeClaim is not repaired twice")
		})
	}
}

func TestHealthyNodesAreLeftAlone(t *testing.T) {
	e := newEnv(t)
	node, nc := e.node(corev1.ConditionTrue, 24*time.Hour)
	assert.Equal(t, reconcile.Result{}, e.reconcile(node))
	assert.True(t, e.get(nc).DeletionTimestamp.IsZero())

	// A Node no NodeClaim owns is not Karpenter's to replace.
	orphan := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("orphan"), Labels: map[string]string{v1.NodePoolLabelKey: e.pool}},
		Spec:       corev1.NodeSpec{ProviderID: "fake:///orphan"},
	}
	require.NoError(t, cp.Client.Create(e.ctx, orphan))
	orphan.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(e.clock.Now().Add(-time.Hour))}}
	require.NoError(t, cp.Client.Status().Update(e.ctx, orphan))
	assert.Equal(t, reconcile.Result{}, e.reconcile(orphan))
}

// TestBlockedAboveTwentyPercent: with 3 nodes, 20% rounds up to 1, so one
// unhealthy node is repaired and two block repair.
func TestBlockedAboveTwentyPercent(t *testing.T) {
	e := newEnv(t)
	e.node(corev1.ConditionTrue, time.Hour)
	first, firstClaim := e.node(corev1.ConditionFalse, time.Hour)
	second, secondClaim := e.node(corev1.ConditionUnknown, time.Hour)

	res := e.reconcile(first)
	assert.Positive(t, res.RequeueAfter, "a blocked repair is retried")
	e.reconcile(second)
	assert.True(t, e.get(firstClaim).DeletionTimestamp.IsZero())
	assert.True(t, e.get(secondClaim).DeletionTimestamp.IsZero())
	blocked := e.events.Events(health.EventNodeRepairBlocked)
	require.NotEmpty(t, blocked)
	objects := map[string]bool{}
	for _, ev := range blocked {
		assert.Contains(t, ev.Message, "more than 20% nodes are unhealthy in the nodepool")
		objects[ev.Object] = true
	}
	assert.True(t, objects[first.Name] && objects[e.pool], "the event goes to the node, its NodeClaim and the NodePool: %v", objects)

	// The second node recovers: one of three is within 20% rounded up.
	require.NoError(t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(second), second))
	second.Status.Conditions[0].Status = corev1.ConditionTrue
	require.NoError(t, cp.Client.Status().Update(e.ctx, second))
	e.reconcile(first)
	assert.False(t, e.get(firstClaim).DeletionTimestamp.IsZero(), "repaired once the pool is healthy enough")
}

func TestAllowedUnhealthy(t *testing.T) {
	for total, want := range map[int]int{0: 0, 1: 1, 3: 1, 5: 1, 6: 2, 10: 2, 11: 3, 100: 20} {
		assert.Equal(t, want, health.AllowedUnhealthy(total), "%d nodes", total)
	}
}
