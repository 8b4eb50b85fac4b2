package disruption_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/disruption"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	pure "github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
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
	events  *testutil.Recorder
	sim     *fakeSimulator
	ctrl    *disruption.Controller
	pool    *v1.NodePool
	ns      string
}

// fakeSimulator answers with a fixed plan: its pods are the moved ones.
type fakeSimulator struct {
	newClaims     []*scheduling.NewNodeClaim
	unschedulable bool
	calls         int
}

func (f *fakeSimulator) Simulate([]*pure.Candidate, pure.SimulationOptions) (*pure.Simulation, error) {
	f.calls++
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "moved", Namespace: "default", UID: "moved-uid"}}
	res := &scheduling.Result{NewNodeClaims: f.newClaims}
	if len(f.newClaims) == 0 || f.unschedulable {
		res.Placements = []scheduling.Placement{{Pod: pod, NodeClaim: -1}}
		return &pure.Simulation{Result: res, Unschedulable: []string{"default/moved"}}, nil
	}
	res.Placements = []scheduling.Placement{{Pod: pod, NodeClaim: 0}}
	return &pure.Simulation{Result: res, Replacements: f.newClaims[:1]}, nil
}

// simulating makes every pass use sim.
func simulating(sim pure.Simulator) disruption.Simulators {
	return func(context.Context) pure.Simulator { return sim }
}

// failingLauncher refuses every create.
type failingLauncher struct{}

func (failingLauncher) CreateNodeClaims(context.Context, []*scheduling.NewNodeClaim, map[string]*v1.NodePool) ([]*v1.NodeClaim, error) {
	return nil, errors.New("insufficient capacity")
}

func newEnv(t *testing.T, launcher disruption.Launcher, budget string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), events: &testutil.Recorder{}, sim: &fakeSimulator{}}
	e.cluster = state.NewCluster(e.clock, cp.Client, state.Options{})
	if launcher == nil {
		launcher = provisioning.NewProvisioner(cp.Client, fakecloud.New(e.clock), e.cluster, e.events, provisioning.Options{Clock: e.clock})
	}
	e.ctrl = disruption.NewController(cp.Client, e.cluster, launcher, simulating(e.sim), disruption.Options{
		Clock: e.clock, Recorder: e.events, ValidationDelay: -1,
	})
	e.ns = testutil.UniqueName("ns")
	require.NoError(t, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	e.pool = e.nodePool(testutil.UniqueName("pool"), budget)
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) cleanup() {
	ctx := context.Background()
	for _, list := range []client.ObjectList{&v1.NodeClaimList{}, &corev1.NodeList{}} {
		require.NoError(e.t, cp.Client.List(ctx, list))
		items, _ := meta.ExtractList(list)
		for _, obj := range items {
			o := obj.(client.Object)
			if len(o.GetFinalizers()) > 0 {
				patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
				o.SetFinalizers(nil)
				_ = cp.Client.Patch(ctx, o, patch)
			}
			_ = cp.Client.Delete(ctx, o)
		}
	}
	_ = cp.Client.Delete(ctx, e.pool)
	require.Eventually(e.t, func() bool {
		ncs, nodes := &v1.NodeClaimList{}, &corev1.NodeList{}
		return cp.Client.List(ctx, ncs) == nil && len(ncs.Items) == 0 && cp.Client.List(ctx, nodes) == nil && len(nodes.Items) == 0
	}, 10*time.Second, 50*time.Millisecond)
}

func (e *env) nodePool(name, budget string) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	np.Spec.Disruption.ConsolidateAfter = v1.NewNillableDuration(0)
	np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: budget}}
	require.NoError(e.t, cp.Client.Create(e.ctx, np))
	return np
}

type nodeOpt func(*v1.NodeClaim, *corev1.Node)

func conditionOpt(t string) nodeOpt {
	return func(nc *v1.NodeClaim, _ *corev1.Node) {
		nc.Status.Conditions = append(nc.Status.Conditions, v1.Condition{Type: t, Status: "True", Reason: t, LastTransitionTime: metav1.Now()})
	}
}

var (
	consolidatable = conditionOpt(v1.ConditionTypeConsolidatable)
	drifted        = conditionOpt(v1.ConditionTypeDrifted)
)

func tainted(_ *v1.NodeClaim, n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, v1.DisruptedNoScheduleTaint)
}

// managedNode creates an initialized NodeClaim and its Ready Node, both
// with the termination finalizer so deletion can be observed, and puts
// them in cluster state.
func (e *env) managedNode(opts ...nodeOpt) (*v1.NodeClaim, *corev1.Node) {
	e.t.Helper()
	name := testutil.UniqueName(e.pool.Name)
	labels := map[string]string{v1.NodePoolLabelKey: e.pool.Name, v1.CapacityTypeLabelKey: v1.CapacityTypeOnDemand,
		v1.NodeRegisteredLabelKey: "true", v1.NodeInitializedLabelKey: "true"}
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{v1.TerminationFinalizer}},
		Spec: v1.NodeClaimSpec{
			Requirements: e.pool.Spec.Template.Spec.Requirements,
			NodeClassRef: e.pool.Spec.Template.Spec.NodeClassRef,
		},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{v1.TerminationFinalizer}},
		Spec: corev1.NodeSpec{ProviderID: fakecloud.ProviderIDPrefix + name}}
	require.NoError(e.t, cp.Client.Create(e.ctx, nc))
	nc.Status.ProviderID, nc.Status.NodeName = node.Spec.ProviderID, name
	conditionOpt(v1.ConditionTypeInitialized)(nc, node)
	for _, o := range opts {
		o(nc, node)
	}
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, nc))
	require.NoError(e.t, cp.Client.Create(e.ctx, node))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, node))
	e.sync()
	return nc, node
}

// sync copies every Node and NodeClaim from the API server into state,
// as the informers would.
func (e *env) sync() {
	e.t.Helper()
	ncs, nodes := &v1.NodeClaimList{}, &corev1.NodeList{}
	require.NoError(e.t, cp.Client.List(e.ctx, ncs))
	require.NoError(e.t, cp.Client.List(e.ctx, nodes))
	for i := range ncs.Items {
		e.cluster.UpdateNodeClaim(&ncs.Items[i])
	}
	for i := range nodes.Items {
		e.cluster.UpdateNode(&nodes.Items[i])
	}
}

func (e *env) pod(node *corev1.Node, name string, annotations map[string]string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, p))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, p))
	e.cluster.UpdatePod(p)
	return p
}

func (e *env) reconcile() bool {
	e.t.Helper()
	acted, err := e.ctrl.Reconcile(e.ctx)
	require.NoError(e.t, err)
	e.sync()
	return acted
}

// step advances the fake clock past the queue's backoff and runs it.
func (e *env) step(d time.Duration) {
	e.clock.Step(d)
	e.ctrl.Queue().Reconcile(e.ctx)
	e.sync()
}

func (e *env) nodeClaim(name string) *v1.NodeClaim {
	e.t.Helper()
	nc := &v1.NodeClaim{}
	require.NoError(e.t, cp.Client.Get(e.ctx, client.ObjectKey{Name: name}, nc))
	return nc
}

func (e *env) node(name string) *corev1.Node {
	e.t.Helper()
	n := &corev1.Node{}
	require.NoError(e.t, cp.Client.Get(e.ctx, client.ObjectKey{Name: name}, n))
	return n
}

func hasDrainTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.MatchTaint(&pure.DrainTaint) {
			return true
		}
	}
	return false
}

func hasTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.MatchTaint(&v1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}

func disruptionReason(nc *v1.NodeClaim) string {
	if c := meta.FindStatusCondition(nc.GetConditions(), v1.ConditionTypeDisruptionReason); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

func isGoneOrDeleting(err error, nc *v1.NodeClaim) bool {
	return apierrors.IsNotFound(err) || (err == nil && !nc.DeletionTimestamp.IsZero())
}
