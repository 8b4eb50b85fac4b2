package lifecycle_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/lifecycle"
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
	logs   *testutil.Logs
	ctrl   *lifecycle.Controller
	kube   client.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), events: &testutil.Recorder{}, logs: &testutil.Logs{}, kube: cp.Client}
	e.ctx = e.logs.Context(ctx)
	e.cloud = fakecloud.New(e.clock)
	e.ctrl = lifecycle.NewController(cp.Client, e.cloud, lifecycle.Options{Clock: e.clock, Recorder: e.events})
	return e
}

func (e *env) withClient(kube client.Client) {
	e.kube = kube
	e.ctrl = lifecycle.NewController(kube, e.cloud, lifecycle.Options{Clock: e.clock, Recorder: e.events})
}

// intercept gives the controller a client of its own whose calls go through
// funcs first (controller-runtime's interceptor): the tests inject stale
// reads, racing writers and refusals there.
func (e *env) intercept(funcs interceptor.Funcs) {
	e.t.Helper()
	base, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Client.Scheme()})
	require.NoError(e.t, err)
	e.withClient(interceptor.NewClient(base, funcs))
}

// tally counts writes and how many of them the API server refused: a
// conflict on a stale resourceVersion, or a JSON patch whose test failed
// (Invalid).
type tally struct {
	mu                          sync.Mutex
	writes, conflicts, refusals int
}

func (t *tally) add(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes++
	if apierrors.IsConflict(err) {
		t.conflicts++
	}
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		t.refusals++
	}
	return err
}

func (t *tally) counts() (writes, conflicts, refusals int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.writes, t.conflicts, t.refusals
}

func (e *env) nodeClaim(mutate ...func(*v1.NodeClaim)) *v1.NodeClaim {
	e.t.Helper()
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:   testutil.UniqueName("default"),
			Labels: map[string]string{v1.NodePoolLabelKey: "default", "team": "user"},
		},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
				{Key: "example.com/tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"gold"}},
			},
			Taints:        []corev1.Taint{{Key: "example.com/special", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "example.com/startup", Effect: corev1.TaintEffectNoSchedule}},
			Resources:     v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("3")}},
			NodeClassRef:  &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"},
		},
	}
	for _, m := range mutate {
		m(nc)
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, nc))
	return nc
}

func (e *env) reconcile(name string) reconcile.Result {
	e.t.Helper()
	res, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(e.t, err)
	return res
}

func (e *env) get(name string) *v1.NodeClaim {
	e.t.Helper()
	nc := &v1.NodeClaim{}
	require.NoError(e.t, cp.Client.Get(e.ctx, types.NamespacedName{Name: name}, nc))
	return nc
}

func (e *env) gone(name string) bool {
	e.t.Helper()
	err := cp.Client.Get(e.ctx, types.NamespacedName{Name: name}, &v1.NodeClaim{})
	return client.IgnoreNotFound(err) == nil && err != nil
}

// kubeletNode creates the Node a kubelet on the instance would register.
func (e *env) kubeletNode(nc *v1.NodeClaim) *corev1.Node {
	e.t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("node"), Labels: map[string]string{corev1.LabelHostname: "host"}},
		Spec: corev1.NodeSpec{
			ProviderID: nc.Status.ProviderID,
			Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint,
				{Key: "example.com/startup", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, node))
	require.NoError(e.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status = corev1.NodeStatus{
			Capacity:    nc.Status.Capacity,
			Allocatable: nc.Status.Allocatable,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}},
		}
		return cp.Client.Status().Update(e.ctx, node)
	}))
	return node
}

// setNodeReady is the kubelet reporting Ready and the node lifecycle
// controller lifting the not-ready taint the API server's
// TaintNodesByCondition admission put on at creation.
func (e *env) setNodeReady(node *corev1.Node) {
	e.t.Helper()
	e.readyWithout(node, corev1.TaintNodeNotReady)
}

// readyWithout reports node Ready as its kubelet would and then takes the
// named taints off it.
func (e *env) readyWithout(node *corev1.Node, taints ...string) {
	e.t.Helper()
	// A running controller may write the Node between our read and write:
	// retry on conflict as a kubelet would.
	require.NoError(e.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
		return cp.Client.Status().Update(e.ctx, node)
	}))
	require.NoError(e.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(e.ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		for _, key := range taints {
			node.Spec.Taints = removeTaint(node.Spec.Taints, key)
		}
		return cp.Client.Update(e.ctx, node)
	}))
}

func requireCondition(t *testing.T, nc *v1.NodeClaim, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := nc.Condition(condType)
	require.NotNil(t, c, "condition %s missing", condType)
	require.Equal(t, status, c.Status, "condition %s: %+v", condType, c)
	require.Equal(t, reason, c.Reason, "condition %s: %+v", condType, c)
}

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
}

func ptrQ(list corev1.ResourceList, name corev1.ResourceName) string {
	q := list[name]
	return q.String()
}

func resourceQ(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func nodeclaimCond(nc *v1.NodeClaim, t string) *v1.Condition { return nc.Condition(t) }

// taintKeys lists the node's taints except the one admission adds.
func taintKeys(node *corev1.Node) []string {
	var out []string
	for _, t := range node.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			out = append(out, t.Key)
		}
	}
	return out
}

func removeTaint(taints []corev1.Taint, key string) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}
