package nodepool_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kwokv1alpha1 "github.com/karpenter-go/karpenter/pkg/apis/kwok/v1alpha1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/counter"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/hash"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/readiness"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/validation"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/state"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func cleanup(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodeClaim{}))
		require.NoError(t, cp.Client.DeleteAllOf(ctx, &v1.NodePool{}))
		classes := &kwokv1alpha1.KWOKNodeClassList{}
		require.NoError(t, cp.Client.List(ctx, classes))
		for i := range classes.Items {
			c := &classes.Items[i]
			if len(c.Finalizers) > 0 {
				c.Finalizers = nil
				require.NoError(t, client.IgnoreNotFound(cp.Client.Update(ctx, c)))
			}
			require.NoError(t, client.IgnoreNotFound(cp.Client.Delete(ctx, c)))
		}
	})
}

func createNodePool(t *testing.T, name, nodeClass string) *v1.NodePool {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.SetLabelMap(map[string]string{"team": "a"})
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: nodeClass}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("100")}
	require.NoError(t, cp.Client.Create(context.Background(), np))
	return np
}

func createNodeClass(t *testing.T, name string, ready *metav1.Condition, finalizer bool) *kwokv1alpha1.KWOKNodeClass {
	t.Helper()
	ctx := context.Background()
	nc := &kwokv1alpha1.KWOKNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if finalizer {
		nc.Finalizers = []string{"example.io/hold"}
	}
	require.NoError(t, cp.Client.Create(ctx, nc))
	if ready != nil {
		ready.LastTransitionTime = metav1.Now()
		nc.Status.Conditions = []metav1.Condition{*ready}
		require.NoError(t, cp.Client.Status().Update(ctx, nc))
	}
	return nc
}

func reconcileOnce(t *testing.T, r reconcile.Reconciler, name string) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(t, err)
	return res
}

func get(t *testing.T, name string) *v1.NodePool {
	t.Helper()
	np := &v1.NodePool{}
	require.NoError(t, cp.Client.Get(context.Background(), types.NamespacedName{Name: name}, np))
	return np
}

// kwokClasses supports the KWOKNodeClass kind, as the kwok provider does.
type kwokClasses struct{}

func (kwokClasses) GetSupportedNodeClasses() []cloudprovider.NodeClass {
	return []cloudprovider.NodeClass{&kwokv1alpha1.KWOKNodeClass{}}
}

func condition(np *v1.NodePool, condType string) metav1.Condition {
	if c := meta.FindStatusCondition(np.Status.Conditions, condType); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestReadiness(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T)
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"missing node class", func(*testing.T) {}, metav1.ConditionFalse, readiness.ReasonNodeClassNotFound},
		{"kwok node class without conditions", func(t *testing.T) { createNodeClass(t, "cls", nil, false) },
			metav1.ConditionTrue, v1.ConditionTypeNodeClassReady},
		{"node class ready", func(t *testing.T) {
			createNodeClass(t, "cls", &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}, false)
		}, metav1.ConditionTrue, v1.ConditionTypeNodeClassReady},
		{"node class not ready propagates its reason", func(t *testing.T) {
			createNodeClass(t, "cls", &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SubnetsNotFound", Message: "no subnets"}, false)
		}, metav1.ConditionFalse, "SubnetsNotFound"},
		{"node class readiness unknown", func(t *testing.T) {
			createNodeClass(t, "cls", &metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "AwaitingReconciliation"}, false)
		}, metav1.ConditionFalse, readiness.ReasonNodeClassReadinessUnknown},
		{"node class terminating", func(t *testing.T) {
			nc := createNodeClass(t, "cls", &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}, true)
			require.NoError(t, cp.Client.Delete(context.Background(), nc))
		}, metav1.ConditionFalse, readiness.ReasonNodeClassTerminating},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanup(t)
			tt.setup(t)
			createNodePool(t, "pool", "cls")
			reconcileOnce(t, readiness.NewController(cp.Client, kwokClasses{}), "pool")
			got := condition(get(t, "pool"), v1.ConditionTypeNodeClassReady)
			assert.Equal(t, tt.wantStatus, got.Status)
			assert.Equal(t, tt.wantReason, got.Reason)
		})
	}
}

func TestReadyNeedsValidationAndNodeClass(t *testing.T) {
	cleanup(t)
	createNodePool(t, "pool", "cls")
	val, rd := validation.NewController(cp.Client), readiness.NewController(cp.Client, kwokClasses{})

	reconcileOnce(t, val, "pool")
	np := get(t, "pool")
	assert.Equal(t, metav1.ConditionTrue, condition(np, v1.ConditionTypeValidationSucceeded).Status)
	assert.Equal(t, metav1.ConditionUnknown, condition(np, "Ready").Status, "NodeClassReady not known yet")

	reconcileOnce(t, rd, "pool")
	np = get(t, "pool")
	ready := condition(np, "Ready")
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "the node class is missing")
	assert.Equal(t, "UnhealthyDependents", ready.Reason)
	assert.Contains(t, ready.Message, "NodeClassReady=False")

	createNodeClass(t, "cls", nil, false)
	reconcileOnce(t, rd, "pool")
	np = get(t, "pool")
	ready = condition(np, "Ready")
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, "Ready", ready.Reason)
	assert.Equal(t, np.Generation, ready.ObservedGeneration)
}

func TestHashController(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	createNodePool(t, "pool", "cls")
	np := get(t, "pool")
	// NodeClaims stamped by an older hash version: one drifted, one not.
	for _, name := range []string{"current", "drifted"} {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{v1.NodePoolLabelKey: "pool"},
			Annotations: map[string]string{v1.NodePoolHashAnnotationKey: "old", v1.NodePoolHashVersionAnnotationKey: "v2"}}}
		nc.Spec.NodeClassRef = np.Spec.Template.Spec.NodeClassRef
		nc.Spec.Requirements = np.Spec.Template.Spec.Requirements
		require.NoError(t, cp.Client.Create(ctx, nc))
		if name == "drifted" {
			nc.Status.Conditions = []v1.Condition{{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodePoolDrifted", LastTransitionTime: metav1.Now()}}
			require.NoError(t, cp.Client.Status().Update(ctx, nc))
		}
	}

	reconcileOnce(t, hash.NewController(cp.Client), "pool")
	np = get(t, "pool")
	want := np.Hash()
	assert.Equal(t, want, np.Annotations[v1.NodePoolHashAnnotationKey])
	assert.Equal(t, "v3", np.Annotations[v1.NodePoolHashVersionAnnotationKey])

	for name, wantHash := range map[string]string{"current": want, "drifted": "old"} {
		nc := &v1.NodeClaim{}
		require.NoError(t, cp.Client.Get(ctx, types.NamespacedName{Name: name}, nc))
		assert.Equal(t, wantHash, nc.Annotations[v1.NodePoolHashAnnotationKey], name)
		assert.Equal(t, "v3", nc.Annotations[v1.NodePoolHashVersionAnnotationKey], name)
	}

	// A template change moves the NodePool's hash; NodeClaims keep theirs
	// (that difference is drift).
	np.Spec.Template.SetLabelMap(map[string]string{"team": "b"})
	require.NoError(t, cp.Client.Update(ctx, np))
	reconcileOnce(t, hash.NewController(cp.Client), "pool")
	np = get(t, "pool")
	assert.NotEqual(t, want, np.Annotations[v1.NodePoolHashAnnotationKey])
	nc := &v1.NodeClaim{}
	require.NoError(t, cp.Client.Get(ctx, types.NamespacedName{Name: "current"}, nc))
	assert.Equal(t, want, nc.Annotations[v1.NodePoolHashAnnotationKey])
}

// TestHashOfStoredNodePool checks the annotation written for a NodePool as
// the API server stores it (expireAfter defaulted to 720h) against the value
// upstream Karpenter computes for that object ("kwok-as-defaulted" in the
// hash package's vectors), so that nodes launched by upstream are not drifted
// after a switch.
func TestHashOfStoredNodePool(t *testing.T) {
	cleanup(t)
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "kwok"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: kwokv1alpha1.Group, Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	require.NoError(t, cp.Client.Create(context.Background(), np))
	reconcileOnce(t, hash.NewController(cp.Client), "kwok")
	assert.Equal(t, "12745407319442031341", get(t, "kwok").Annotations[v1.NodePoolHashAnnotationKey])
}

type fakeCluster struct {
	synced    bool
	usage     map[string]corev1.ResourceList
	offerings map[string][]state.NodeOffering
}

func (f *fakeCluster) Synced(context.Context) bool { return f.synced }
func (f *fakeCluster) NodePoolResources(name string) corev1.ResourceList {
	return f.usage[name]
}
func (f *fakeCluster) NodePoolOfferings(name string) []state.NodeOffering {
	return f.offerings[name]
}

// catalog prices two offerings of one type; GetInstanceTypes fails when
// broken is set.
type catalog struct{ broken bool }

func (c *catalog) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	if c.broken {
		return nil, errors.New("catalog unavailable")
	}
	return []*cloudprovider.InstanceType{{Name: "c7a.large", Offerings: []scheduling.Offering{
		{Zone: "zone-a", CapacityType: "on-demand", Price: 0.10, Available: true},
		{Zone: "zone-a", CapacityType: "spot", Price: 0.04, Available: true},
	}}}, nil
}

func TestCounter(t *testing.T) {
	cleanup(t)
	createNodePool(t, "pool", "cls")
	cluster := &fakeCluster{}
	prices := &catalog{}
	c := counter.NewController(cp.Client, cluster, prices)

	res := reconcileOnce(t, c, "pool")
	assert.Equal(t, time.Second, res.RequeueAfter, "waits for the state to sync")
	assert.Nil(t, get(t, "pool").Status.Nodes)

	cluster.synced = true
	res = reconcileOnce(t, c, "pool")
	assert.Equal(t, counter.Resync, res.RequeueAfter)
	np := get(t, "pool")
	require.NotNil(t, np.Status.Nodes)
	assert.Zero(t, *np.Status.Nodes)
	assert.True(t, np.Status.Resources.Cpu().IsZero())
	assert.Contains(t, np.Status.Resources, corev1.ResourceMemory, "well-known resources show as zero")

	cluster.usage = map[string]corev1.ResourceList{"pool": {
		corev1.ResourceCPU:    resource.MustParse("12"),
		corev1.ResourceMemory: resource.MustParse("48Gi"),
		corev1.ResourcePods:   resource.MustParse("116"),
		v1.ResourceNodes:      resource.MustParse("2"),
	}}
	reconcileOnce(t, c, "pool")
	np = get(t, "pool")
	assert.Equal(t, int64(2), *np.Status.Nodes)
	assert.Equal(t, "12", np.Status.Resources.Cpu().String())
	assert.Equal(t, "48Gi", np.Status.Resources.Memory().String())
	nodes := np.Status.Resources[v1.ResourceNodes]
	assert.Equal(t, "2", nodes.String())

	// Cost: two on-demand nodes and a spot one priced, one offering unknown.
	off := func(ct, it string, used float64) state.NodeOffering {
		return state.NodeOffering{OfferingKey: scheduling.OfferingKey{InstanceType: it, Zone: "zone-a", CapacityType: ct}, Utilization: used}
	}
	cluster.offerings = map[string][]state.NodeOffering{"pool": {
		off("on-demand", "c7a.large", 1), off("on-demand", "c7a.large", 0.25), off("spot", "c7a.large", 0.5),
		off("on-demand", "m7a.large", 0),
	}}
	reconcileOnce(t, c, "pool")
	assert.InDelta(t, 0.24, testutil.ToFloat64(metrics.NodePoolCostPerHour.WithLabelValues("pool")), 1e-9)
	// Idle: 0 + 0.10 × 0.75 + 0.04 × 0.5.
	assert.InDelta(t, 0.095, testutil.ToFloat64(metrics.NodePoolIdleCostPerHour.WithLabelValues("pool")), 1e-9)
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.NodePoolUnpricedNodes.WithLabelValues("pool")))
	// A catalog that cannot be read keeps the last cost.
	prices.broken = true
	cluster.offerings["pool"] = cluster.offerings["pool"][:1]
	reconcileOnce(t, c, "pool")
	assert.InDelta(t, 0.24, testutil.ToFloat64(metrics.NodePoolCostPerHour.WithLabelValues("pool")), 1e-9)
	prices.broken = false
	reconcileOnce(t, c, "pool")
	assert.InDelta(t, 0.10, testutil.ToFloat64(metrics.NodePoolCostPerHour.WithLabelValues("pool")), 1e-9)
	assert.Zero(t, testutil.ToFloat64(metrics.NodePoolUnpricedNodes.WithLabelValues("pool")))
}
