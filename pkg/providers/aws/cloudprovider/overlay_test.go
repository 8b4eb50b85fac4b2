package cloudprovider_test

import (
	"context"
	"testing"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider/overlay"
)

// TestOverlaysAtLaunch: the AWS provider behind the NodeOverlay decorator
// launches from the overlaid instance types. An overlay that makes the
// dearest candidate the cheapest gets it launched (the fleet request is
// prioritized by the overlaid prices, which EC2's lowest-price could not
// know); an overlay adding an extended resource to one type lets a
// NodeClaim requesting it launch that type, with the resource in its
// capacity; overlays on no candidate leave EC2's lowest-price choice.
func TestOverlaysAtLaunch(t *testing.T) {
	ctx := context.Background()
	rec := &recordingEC2{Client: ec2API}
	e := newEnvWith(t, rec)
	order := e.byPrice(t)
	cheapest, dearest := order[0], order[len(order)-1]
	device := corev1.ResourceName("example.com/device")
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = e.nodeClaim(t).Spec.NodeClassRef

	typeIs := func(name string) []v1alpha1.NodeSelectorRequirement {
		return []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}
	}
	cases := []struct {
		name         string
		spec         v1alpha1.NodeOverlaySpec
		requests     corev1.ResourceList
		wantType     string
		wantStrategy ec2types.FleetOnDemandAllocationStrategy
		wantPrice    bool // price-overlay-applied on the NodeClaim
		wantCapacity bool // capacity-overlay-applied, and the device in its capacity
	}{
		{"a price makes the dearest type cheapest", v1alpha1.NodeOverlaySpec{Requirements: typeIs(dearest), Price: ptr("0.0001")}, nil,
			dearest, ec2types.FleetOnDemandAllocationStrategyPrioritized, true, false},
		{"capacity fits an extended resource", v1alpha1.NodeOverlaySpec{Requirements: typeIs(dearest), Capacity: corev1.ResourceList{device: resource.MustParse("4")}},
			corev1.ResourceList{device: resource.MustParse("1")}, dearest, ec2types.FleetOnDemandAllocationStrategyLowestPrice, false, true},
		{"an overlay on no candidate", v1alpha1.NodeOverlaySpec{Requirements: typeIs("m5.24xlarge"), Price: ptr("0.0001")}, nil,
			cheapest, ec2types.FleetOnDemandAllocationStrategyLowestPrice, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			its, err := e.cp.GetInstanceTypes(ctx, np)
			require.NoError(t, err)
			store, verdicts := overlay.Evaluate([]v1alpha1.NodeOverlay{{ObjectMeta: metav1.ObjectMeta{Name: "o"}, Spec: tc.spec}},
				[]overlay.Pool{overlay.PoolOf(np, its)})
			require.True(t, verdicts["o"].Valid(), "%+v", verdicts["o"])
			holder := overlay.NewHolder()
			holder.Publish(store)

			nc := e.nodeClaim(t)
			nc.Spec.Resources.Requests = tc.requests
			got, err := overlay.Decorate(e.cp, holder).Create(ctx, nc)
			require.NoError(t, err)
			defer cleanup(t, e, got)

			assert.Equal(t, tc.wantType, got.Labels[corev1.LabelInstanceTypeStable])
			in := rec.last(t)
			require.NotNil(t, in.OnDemandOptions)
			assert.Equal(t, tc.wantStrategy, in.OnDemandOptions.AllocationStrategy)
			assert.Equal(t, tc.wantPrice, got.Annotations[v1.PriceOverlayAppliedAnnotationKey] == "true")
			assert.Equal(t, tc.wantCapacity, got.Annotations[v1.CapacityOverlayAppliedAnnotationKey] == "true")
			q, ok := got.Status.Capacity[device]
			assert.Equal(t, tc.wantCapacity, ok, "capacity %v", got.Status.Capacity)
			if tc.wantCapacity {
				assert.Equal(t, int64(4), q.Value())
			}
		})
	}
}

func ptr(s string) *string { return &s }
