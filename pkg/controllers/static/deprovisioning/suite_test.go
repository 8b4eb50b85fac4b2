package deprovisioning_test

import (
	"context"
	"fmt"
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
	ctrltestutil "github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/static/deprovisioning"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/state"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

type env struct {
	t       *testing.T
	ctx     context.Context
	clock   *clocktesting.FakeClock
	cluster *state.Cluster
	ctrl    *deprovisioning.Controller
	np      *v1.NodePool
}

func newEnv(t *testing.T, replicas int64) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		require.NoError(t, cp.Client.DeleteAllOf(context.Background(), &v1.NodeClaim{}))
		require.NoError(t, cp.Client.DeleteAllOf(context.Background(), &v1.NodePool{}))
	})
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	cluster := state.NewCluster(clk, cp.Client, state.Options{})
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: ctrltestutil.UniqueName("static")}}
	np.Spec.Replicas = &replicas
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	require.NoError(t, cp.Client.Create(ctx, np))
	return &env{t: t, ctx: ctx, clock: clk, cluster: cluster, ctrl: deprovisioning.NewController(cp.Client, cluster, clk), np: np}
}

// nodeClaim creates a NodeClaim of the pool in the API server and the
// cluster state; launched ones get a provider ID and a Node carrying pods.
func (e *env) nodeClaim(name string, launched bool, pods ...*corev1.Pod) *v1.NodeClaim {
	e.t.Helper()
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: e.np.Name + "-" + name, Labels: map[string]string{v1.NodePoolLabelKey: e.np.Name, v1.CapacityTypeLabelKey: "on-demand"}},
		Spec: v1.NodeClaimSpec{
			Requirements: e.np.Spec.Template.Spec.Requirements,
			NodeClassRef: e.np.Spec.Template.Spec.NodeClassRef,
		},
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, nc))
	if launched {
		nc.Status.ProviderID = "fake:///" + nc.Name
		require.NoError(e.t, cp.Client.Status().Update(e.ctx, nc))
		e.cluster.UpdateNode(&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: map[string]string{v1.NodePoolLabelKey: e.np.Name}},
			Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
		})
		for i, p := range pods {
			p.Name = fmt.Sprintf("%s-%d", nc.Name, i)
			p.Namespace = "default"
			p.Spec.NodeName = nc.Name
			p.Status.Phase = corev1.PodRunning
			e.cluster.UpdatePod(p)
		}
	}
	e.cluster.UpdateNodeClaim(nc)
	return nc
}

func pod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Now()}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func daemonSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid"}}
}

func doNotDisrupt(v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: v} }
}

func priority(n int32) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.Priority = &n } }

func (e *env) scale(replicas int64) {
	e.t.Helper()
	require.NoError(e.t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(e.np), e.np))
	e.np.Spec.Replicas = &replicas
	require.NoError(e.t, cp.Client.Update(e.ctx, e.np))
}

func (e *env) reconcile() {
	e.t.Helper()
	_, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: e.np.Name}})
	require.NoError(e.t, err)
}

// remaining lists the pool's NodeClaims that are not deleted, and feeds
// deletions back into the state as its informer would.
func (e *env) remaining() []string {
	e.t.Helper()
	list := &v1.NodeClaimList{}
	require.NoError(e.t, cp.Client.List(e.ctx, list, client.MatchingLabels{v1.NodePoolLabelKey: e.np.Name}))
	var names []string
	seen := map[string]bool{}
	for _, nc := range list.Items {
		seen[nc.Name] = true
		names = append(names, nc.Name[len(e.np.Name)+1:])
	}
	for _, n := range e.cluster.Nodes() {
		if n.NodeClaim != nil && n.NodeClaim.Labels[v1.NodePoolLabelKey] == e.np.Name && !seen[n.NodeClaim.Name] {
			e.cluster.DeleteNodeClaim(n.NodeClaim.Name)
		}
	}
	return names
}

// TestScaleDownOrder removes one NodeClaim per step and checks upstream's
// order: unlaunched, empty (DaemonSet pods only), cheapest to disrupt,
// do-not-disrupt last.
func TestScaleDownOrder(t *testing.T) {
	e := newEnv(t, 5)
	e.nodeClaim("protected", true, pod(doNotDisrupt("true")))
	e.nodeClaim("busy", true, pod(), pod(), pod(priority(1000000000)))
	e.nodeClaim("light", true, pod())
	e.nodeClaim("empty", true, pod(daemonSet))
	e.nodeClaim("unlaunched", false)
	before := disrupted(t, e.np.Name)

	e.reconcile()
	assert.ElementsMatch(t, []string{"protected", "busy", "light", "empty", "unlaunched"}, e.remaining(), "at replicas nothing goes")

	for _, step := range []struct {
		replicas int64
		want     []string
	}{
		{4, []string{"protected", "busy", "light", "empty"}},
		{3, []string{"protected", "busy", "light"}},
		{2, []string{"protected", "busy"}},
		{1, []string{"protected"}},
		{0, nil},
	} {
		e.scale(step.replicas)
		e.reconcile()
		assert.ElementsMatch(t, step.want, e.remaining(), "replicas %d", step.replicas)
	}
	assert.Equal(t, 5.0, disrupted(t, e.np.Name)-before, "each removal is counted with reason overprovisioned")
}

// TestSeveralAtOnce deletes the whole surplus in one pass and never
// a NodeClaim a disruption command is already replacing.
func TestSeveralAtOnce(t *testing.T) {
	e := newEnv(t, 4)
	e.nodeClaim("a", true, pod())
	e.nodeClaim("b", true, pod(), pod())
	drifted := e.nodeClaim("drifted", true)
	e.nodeClaim("replacement", false)
	// StaticDrift marked the drifted node and launched its replacement:
	// the pool is at replicas, not above.
	e.cluster.MarkForDeletion(drifted.Name)
	e.reconcile()
	assert.ElementsMatch(t, []string{"a", "b", "drifted", "replacement"}, e.remaining())

	e.scale(1)
	e.reconcile()
	assert.ElementsMatch(t, []string{"b", "drifted"}, e.remaining(), "two of the three unmarked go, cheapest first; the marked one is the command's")
	e.reconcile()
	assert.ElementsMatch(t, []string{"b", "drifted"}, e.remaining(), "deleted ones are not counted twice")
}

func TestSurplusDurationDoNotDisrupt(t *testing.T) {
	e := newEnv(t, 2)
	young := pod(doNotDisrupt("1h"))
	old := pod(doNotDisrupt("1m"))
	old.CreationTimestamp = metav1.NewTime(e.clock.Now().Add(-time.Hour))
	invalid := pod(doNotDisrupt("soon"))
	e.nodeClaim("young", true, young)
	e.nodeClaim("old", true, old, pod())
	e.nodeClaim("invalid", true, invalid, pod(), pod())
	got := deprovisioning.Surplus(e.cluster.Nodes(), e.np.Name, 3, e.clock.Now())
	var names []string
	for _, nc := range got {
		names = append(names, nc.Name[len(e.np.Name)+1:])
	}
	assert.Equal(t, []string{"old", "invalid", "young"}, names,
		"an elapsed duration protects no more, an invalid value is ignored, a young pod's duration protects")
}

func disrupted(t *testing.T, pool string) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, metrics.NodeClaimsDisruptedTotal.WithLabelValues(metrics.OverprovisionedReason, pool, "on-demand", "", "").Write(m))
	return m.GetCounter().GetValue()
}
