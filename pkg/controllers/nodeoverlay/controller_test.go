package nodeoverlay_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider/overlay"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/fakecloud"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeoverlay"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Main(m, controlplane.Options{}, &cp))
}

func instanceType(name string, price float64) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{
		Name: name,
		Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, scheduling.OpIn, name),
			scheduling.NewRequirement(corev1.LabelTopologyZone, scheduling.OpIn, "test-zone-a"),
			scheduling.NewRequirement(scheduling.LabelCapacityType, scheduling.OpIn, "on-demand"),
		),
		Offerings: []cloudprovider.Offering{{Zone: "test-zone-a", CapacityType: "on-demand", Price: price, Available: true}},
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
	}
}

func createOverlay(t *testing.T, ctx context.Context, name string, weight int32, typ, price string, capacity corev1.ResourceList) {
	t.Helper()
	o := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}}
	o.Spec.Requirements = []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{typ}}}
	o.Spec.Weight = &weight
	if price != "" {
		o.Spec.PriceAdjustment = &price
	}
	o.Spec.Capacity = capacity
	require.NoError(t, cp.Client.Create(ctx, o))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), o) })
}

func condition(t *testing.T, ctx context.Context, name, condType string) *metav1.Condition {
	t.Helper()
	o := &v1alpha1.NodeOverlay{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, o))
	return meta.FindStatusCondition(o.Status.Conditions, condType)
}

// TestController evaluates overlays against a NodePool on the local API
// server: the decorator refuses the pool until the first evaluation, then
// serves overlaid prices and capacity; two overlays of one weight on one
// offering leave the later name in effect and the other False with reason
// Conflict; deleting the winner lets the other take effect.
func TestController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cloud := fakecloud.New(clocktesting.NewFakeClock(time.Now()))
	cloud.Catalog = []*cloudprovider.InstanceType{instanceType("fake.small", 1), instanceType("fake.large", 2)}
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	require.NoError(t, cp.Client.Create(ctx, np))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), np) })

	holder := overlay.NewHolder()
	decorated := overlay.Decorate(cloud, holder)
	c := nodeoverlay.NewController(cp.Client, cloud, holder)
	_, err := decorated.GetInstanceTypes(ctx, np)
	require.True(t, overlay.IsUnevaluated(err), "before the first evaluation the pool is refused, got %v", err)

	device := corev1.ResourceName("example.com/device")
	createOverlay(t, ctx, "alpha", 5, "fake.large", "-10%", nil)
	createOverlay(t, ctx, "beta", 5, "fake.large", "-50%", nil)
	createOverlay(t, ctx, "device", 1, "fake.small", "", corev1.ResourceList{device: resource.MustParse("4")})

	reconcileOnce := func() {
		t.Helper()
		res, err := c.Reconcile(ctx, reconcile.Request{})
		require.NoError(t, err)
		require.Equal(t, nodeoverlay.Resync, res.RequeueAfter)
	}
	reconcileOnce()
	prices := func() map[string]float64 {
		its, err := decorated.GetInstanceTypes(ctx, np)
		require.NoError(t, err)
		out := map[string]float64{}
		for _, it := range its {
			out[it.Name] = it.Offerings[0].Price
			if it.Name == "fake.small" {
				q := it.Capacity[device]
				require.Equal(t, int64(4), q.Value(), "the capacity overlay adds the device to fake.small")
			}
		}
		return out
	}
	require.Equal(t, map[string]float64{"fake.small": 1, "fake.large": 1}, prices(), "beta (the later name) halves fake.large")

	for _, name := range []string{"beta", "device"} {
		require.Equal(t, metav1.ConditionTrue, condition(t, ctx, name, v1alpha1.ConditionTypeReady).Status, name)
		require.Equal(t, metav1.ConditionTrue, condition(t, ctx, name, v1alpha1.ConditionTypeValidationSucceeded).Status, name)
	}
	vs := condition(t, ctx, "alpha", v1alpha1.ConditionTypeValidationSucceeded)
	require.Equal(t, metav1.ConditionFalse, vs.Status)
	require.Equal(t, v1alpha1.ConditionReasonConflict, vs.Reason)
	require.Equal(t, overlay.ConflictMessage, vs.Message)
	ready := condition(t, ctx, "alpha", v1alpha1.ConditionTypeReady)
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Equal(t, v1alpha1.ReasonUnhealthyDependents, ready.Reason)

	// The provider's own catalog is untouched.
	require.Equal(t, 2.0, cloud.Catalog[1].Offerings[0].Price)

	// Without beta, alpha is alone at its weight and applies.
	beta := &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: "beta"}}
	require.NoError(t, cp.Client.Delete(ctx, beta))
	reconcileOnce()
	require.InDelta(t, 1.8, prices()["fake.large"], 1e-9)
	require.Equal(t, metav1.ConditionTrue, condition(t, ctx, "alpha", v1alpha1.ConditionTypeReady).Status)

	// A NodePool created since is refused until the next evaluation.
	late := np.DeepCopy()
	late.ObjectMeta = metav1.ObjectMeta{Name: "late"}
	require.NoError(t, cp.Client.Create(ctx, late))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), late) })
	_, err = decorated.GetInstanceTypes(ctx, late)
	require.True(t, overlay.IsUnevaluated(err))
	reconcileOnce()
	_, err = decorated.GetInstanceTypes(ctx, late)
	require.NoError(t, err)
}
