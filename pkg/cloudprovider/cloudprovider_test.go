package cloudprovider_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

func TestTypedErrors(t *testing.T) {
	cause := errors.New("boom")
	key := cloudprovider.OfferingKey{InstanceType: "m5.large", Zone: "a", CapacityType: "spot"}
	tests := []struct {
		name              string
		err               error
		ice, ncnr, create bool
		notFound          bool
	}{
		{"insufficient capacity", cloudprovider.NewInsufficientCapacityError(cause, key), true, false, false, false},
		{"nodeclass not ready", cloudprovider.NewNodeClassNotReadyError(cause), false, true, false, false},
		{"create error", cloudprovider.NewCreateError(cause, "Reason", "message"), false, false, true, false},
		{"not found", cloudprovider.NewNodeClaimNotFoundError(cause), false, false, false, true},
		{"plain", cause, false, false, false, false},
		{"nil", nil, false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, err := range []error{tt.err, wrap(tt.err)} {
				assert.Equal(t, tt.ice, cloudprovider.IsInsufficientCapacityError(err))
				assert.Equal(t, tt.ncnr, cloudprovider.IsNodeClassNotReadyError(err))
				assert.Equal(t, tt.create, cloudprovider.IsCreateError(err))
				assert.Equal(t, tt.notFound, cloudprovider.IsNodeClaimNotFoundError(err))
				if err != nil {
					assert.ErrorIs(t, err, cause, "the cause stays reachable")
				}
				if tt.notFound {
					assert.NoError(t, cloudprovider.IgnoreNodeClaimNotFoundError(err))
				} else {
					assert.Equal(t, err, cloudprovider.IgnoreNodeClaimNotFoundError(err))
				}
			}
		})
	}

	ce := cloudprovider.AsCreateError(wrap(cloudprovider.NewCreateError(cause, "LaunchFailed", "no luck")))
	require.NotNil(t, ce)
	assert.Equal(t, "LaunchFailed", ce.ConditionReason)
	assert.Equal(t, "no luck", ce.ConditionMessage)
	assert.Nil(t, cloudprovider.AsCreateError(cause))

	var ice *cloudprovider.InsufficientCapacityError
	require.ErrorAs(t, wrap(cloudprovider.NewInsufficientCapacityError(cause, key)), &ice)
	assert.Equal(t, []cloudprovider.OfferingKey{key}, ice.Offerings)
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("outer: %w", err)
}

func TestAllocatable(t *testing.T) {
	it := &cloudprovider.InstanceType{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("1Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
		Overhead: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("2Gi"), // more than capacity
		},
	}
	got := cloudprovider.Allocatable(it)
	assert.True(t, got.Cpu().Equal(resource.MustParse("1900m")), "cpu %s", got.Cpu())
	assert.True(t, got.Memory().IsZero(), "memory clamps at zero, got %s", got.Memory())
	assert.True(t, got.Pods().Equal(resource.MustParse("110")))
	assert.True(t, it.Capacity.Cpu().Equal(resource.MustParse("2")), "capacity is not modified")
}

func TestNodeClaimRequirements(t *testing.T) {
	nc := &v1.NodeClaim{}
	nc.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}},
		{Key: "karpenter.k8s.aws/instance-cpu", Operator: corev1.NodeSelectorOpGt, Values: []string{"3"}},
		{Key: "beta.kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
	}
	reqs, err := cloudprovider.NodeClaimRequirements(nc)
	require.NoError(t, err)
	assert.True(t, reqs.Get(corev1.LabelArchStable).Has("arm64"))
	assert.False(t, reqs.Get("karpenter.k8s.aws/instance-cpu").Has("2"))
	assert.True(t, reqs.Get("karpenter.k8s.aws/instance-cpu").Has("4"))
	assert.True(t, reqs.Get(corev1.LabelOSStable).Has("linux"), "beta keys are normalised")

	nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{Key: "k", Operator: "Bogus"})
	_, err = cloudprovider.NodeClaimRequirements(nc)
	assert.Error(t, err)
}
