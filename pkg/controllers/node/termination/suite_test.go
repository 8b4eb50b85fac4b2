package termination_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/node/termination"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

type env struct {
	t      *testing.T
	ctx    context.Context
	clock  *clocktesting.FakeClock
	cloud  *fakecloud.Provider
	events *testutil.Recorder
	ctrl   *termination.Controller
	ns     string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), events: &testutil.Recorder{}}
	e.cloud = fakecloud.New(e.clock)
	e.ctrl = termination.NewController(cp.Client, e.cloud, termination.Options{Clock: e.clock, Recorder: e.events, Config: cp.Config})
	e.ns = testutil.UniqueName("ns")
	require.NoError(t, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	return e
}

// managedNode creates a launched, registered NodeClaim and its Ready Node
// with the termination finalizer, as the lifecycle controller leaves them.
func (e *env) managedNode(deadline *time.Time) (*v1.NodeClaim, *corev1.Node) {
	e.t.Helper()
	name := testutil.UniqueName("default")
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: "default"}, Finalizers: []string{v1.TerminationFinalizer}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
		},
	}
	if deadline != nil {
		nc.Annotations = map[string]string{v1.NodeClaimTerminationTimestampAnnotationKey: deadline.Format(time.RFC3339)}
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, nc))
	launched, err := e.cloud.Create(e.ctx, nc)
	require.NoError(e.t, err)
	nc.Status.ProviderID = launched.Status.ProviderID
	nc.Status.NodeName = name
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, nc))

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: "default"}, Finalizers: []string{v1.TerminationFinalizer}},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID},
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, node))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, node))
	return nc, node
}

type podOpt func(*corev1.Pod)

func (e *env) pod(node *corev1.Node, name string, opts ...podOpt) *corev1.Pod {
	e.t.Helper()
	zero := int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{
			NodeName:                      node.Name,
			TerminationGracePeriodSeconds: &zero,
			Containers:                    []corev1.Container{{Name: "c", Image: "pause"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, p))
	// Running and Ready, as a kubelet would report: the eviction API skips
	// PDB checks for pods that never started.
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, p))
	return p
}

func daemon(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: types.UID("ds-uid"), Controller: &yes}}
}

func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }

func labels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func annotations(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func grace(seconds int64) podOpt {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &seconds }
}

func (e *env) reconcile(node *corev1.Node) reconcile.Result {
	e.t.Helper()
	res, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
	require.NoError(e.t, err)
	return res
}

// podNames lists the names of pods still present (terminating included).
func (e *env) podNames(namespaces ...string) []string {
	e.t.Helper()
	var out []string
	for _, ns := range namespaces {
		list := &corev1.PodList{}
		require.NoError(e.t, cp.Client.List(e.ctx, list, client.InNamespace(ns)))
		for _, p := range list.Items {
			out = append(out, p.Name)
		}
	}
	return out
}

func (e *env) nodeGone(node *corev1.Node) bool {
	err := cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), &corev1.Node{})
	return err != nil && client.IgnoreNotFound(err) == nil
}

func (e *env) nodeClaim(name string) *v1.NodeClaim {
	e.t.Helper()
	nc := &v1.NodeClaim{}
	require.NoError(e.t, cp.Client.Get(e.ctx, types.NamespacedName{Name: name}, nc))
	return nc
}
