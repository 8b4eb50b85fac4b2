package provisioning_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
	staticprovisioning "github.com/karpenter-go/karpenter/pkg/controllers/static/provisioning"
	"github.com/karpenter-go/karpenter/pkg/state"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

// syncedCluster is the real cluster state, fed by the test instead of
// informers, and always synced (the test decides what it holds).
type syncedCluster struct{ *state.Cluster }

func (syncedCluster) Synced(context.Context) bool { return true }

type env struct {
	t       *testing.T
	ctx     context.Context
	cluster syncedCluster
	ctrl    *staticprovisioning.Controller
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		require.NoError(t, testutil.DeleteNodeClaims(context.Background(), cp.Client))
		require.NoError(t, cp.Client.DeleteAllOf(context.Background(), &v1.NodePool{}))
	})
	c := syncedCluster{state.NewCluster(clocktesting.NewFakeClock(time.Now()), cp.Client, state.Options{})}
	return &env{t: t, ctx: ctx, cluster: c, ctrl: staticprovisioning.NewController(cp.Client, c)}
}

// pool creates a Ready static NodePool.
func (e *env) pool(replicas int64, nodeLimit string) *v1.NodePool {
	e.t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("static")}}
	np.Spec.Replicas = &replicas
	np.Spec.Template.SetLabelMap(map[string]string{"team": "a"})
	np.Spec.Template.Annotations = map[string]string{"example.com/owner": "infra"}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "c5.large"}},
	}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "static", Effect: corev1.TaintEffectNoSchedule}}
	if nodeLimit != "" {
		np.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse(nodeLimit)}
	}
	require.NoError(e.t, cp.Client.Create(e.ctx, np))
	e.setReady(np, true)
	return np
}

func (e *env) setReady(np *v1.NodePool, ready bool) {
	e.t.Helper()
	status := metav1.ConditionTrue
	if !ready {
		status = metav1.ConditionFalse
	}
	np.SetCondition(v1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, "", "")
	np.SetCondition(v1.ConditionTypeNodeClassReady, status, "", "")
	require.NoError(e.t, cp.Client.Status().Update(e.ctx, np))
}

func (e *env) scale(np *v1.NodePool, replicas int64) {
	e.t.Helper()
	require.NoError(e.t, cp.Client.Get(e.ctx, client.ObjectKeyFromObject(np), np))
	np.Spec.Replicas = &replicas
	require.NoError(e.t, cp.Client.Update(e.ctx, np))
}

func (e *env) reconcile(np *v1.NodePool) reconcile.Result {
	e.t.Helper()
	res, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
	require.NoError(e.t, err)
	return res
}

func (e *env) claims(np *v1.NodePool) []v1.NodeClaim {
	e.t.Helper()
	list := &v1.NodeClaimList{}
	require.NoError(e.t, cp.Client.List(e.ctx, list, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}))
	return list.Items
}

func TestKeepsReplicas(t *testing.T) {
	e := newEnv(t)
	np := e.pool(2, "")
	res := e.reconcile(np)
	assert.Equal(t, staticprovisioning.Resync, res.RequeueAfter)
	claims := e.claims(np)
	require.Len(t, claims, 2)

	nc := claims[0]
	assert.Equal(t, np.Name, nc.Labels[v1.NodePoolLabelKey])
	assert.Equal(t, "a", nc.Labels["team"])
	assert.Equal(t, "default", nc.Labels[v1.NodeClassLabelKey(np.Spec.Template.Spec.NodeClassRef.GroupKind())])
	assert.Equal(t, "infra", nc.Annotations["example.com/owner"])
	assert.Equal(t, np.Hash(), nc.Annotations[v1.NodePoolHashAnnotationKey], "static NodeClaims carry the hash drift compares")
	assert.Equal(t, v1.NodePoolHashVersion, nc.Annotations[v1.NodePoolHashVersionAnnotationKey])
	assert.Equal(t, np.Spec.Template.Spec.Requirements, nc.Spec.Requirements, "the provider picks among the template's requirements")
	assert.Empty(t, nc.Spec.Resources.Requests, "no pods size a static node")
	assert.Equal(t, np.Spec.Template.Spec.Taints, nc.Spec.Taints)
	require.Len(t, nc.OwnerReferences, 1)
	assert.Equal(t, np.UID, nc.OwnerReferences[0].UID)

	e.reconcile(np)
	assert.Len(t, e.claims(np), 2, "a second pass finds nothing missing")

	e.scale(np, 5)
	e.reconcile(np)
	assert.Len(t, e.claims(np), 5, "scaled up")

	e.scale(np, 1)
	e.reconcile(np)
	assert.Len(t, e.claims(np), 5, "scale-down is deprovisioning's job")
}

func TestReplacesDeletedButNotDisrupting(t *testing.T) {
	e := newEnv(t)
	np := e.pool(3, "")
	e.reconcile(np)
	claims := e.claims(np)
	require.Len(t, claims, 3)

	// A drifted node a disruption command is replacing (marked for
	// deletion) still counts: its replacement is the command's.
	e.cluster.MarkForDeletion(claims[0].Name)
	e.reconcile(np)
	assert.Len(t, e.claims(np), 3)

	// A NodeClaim really being deleted does not count.
	deleting := claims[1].DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	e.cluster.UpdateNodeClaim(deleting)
	e.reconcile(np)
	assert.Len(t, e.claims(np), 4, "one replacement for the deleting NodeClaim")
}

func TestNodeLimit(t *testing.T) {
	e := newEnv(t)
	np := e.pool(5, "3")
	res := e.reconcile(np)
	assert.Len(t, e.claims(np), 3, "limits.nodes caps replicas")
	assert.Equal(t, 30*time.Second, res.RequeueAfter, "a pool held back by its limit is re-checked sooner")
	e.reconcile(np)
	assert.Len(t, e.claims(np), 3)

	counts := staticprovisioning.Count(e.cluster.Nodes(), np.Name)
	n, limited := staticprovisioning.ToCreate(np, counts)
	assert.Zero(t, n)
	assert.True(t, limited)
}

func TestParallelReconcilesDoNotOvershoot(t *testing.T) {
	e := newEnv(t)
	np := e.pool(4, "")
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Len(t, e.claims(np), 4)
}

func TestSkips(t *testing.T) {
	e := newEnv(t)
	notReady := e.pool(2, "")
	e.setReady(notReady, false)
	e.reconcile(notReady)
	assert.Empty(t, e.claims(notReady), "a NodePool that is not Ready launches nothing")

	dynamic := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: testutil.UniqueName("dynamic")}}
	dynamic.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	dynamic.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	require.NoError(t, cp.Client.Create(e.ctx, dynamic))
	e.setReady(dynamic, true)
	e.reconcile(dynamic)
	assert.Empty(t, e.claims(dynamic), "dynamic pools are the provisioner's")

	res, err := e.ctrl.Reconcile(e.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "missing"}})
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter)
}

func TestToCreate(t *testing.T) {
	pool := func(replicas int64, limit string) *v1.NodePool {
		np := &v1.NodePool{}
		np.Spec.Replicas = &replicas
		if limit != "" {
			np.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse(limit)}
		}
		return np
	}
	for _, tt := range []struct {
		name        string
		np          *v1.NodePool
		active      int64
		want        int64
		wantLimited bool
	}{
		{"gap", pool(3, ""), 1, 2, false},
		{"full", pool(3, ""), 3, 0, false},
		{"over", pool(1, ""), 3, 0, false},
		{"capped", pool(5, "4"), 2, 2, true},
		{"at limit", pool(5, "2"), 2, 0, true},
		{"above limit", pool(5, "1"), 2, 0, true},
		{"limit not binding", pool(3, "10"), 0, 3, false},
		{"zero replicas", pool(0, ""), 0, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, limited := staticprovisioning.ToCreate(tt.np, staticprovisioning.Counts{Active: tt.active})
			assert.Equal(t, tt.want, n)
			assert.Equal(t, tt.wantLimited, limited)
		})
	}
}
