package cloudprovider_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// TestDedicatedTenancyPrice: the on-demand offerings of a NodePool that
// allows only dedicated tenancy (by requirement or template label) carry
// the Pricing API's dedicated price; spot offerings, and every offering of
// a NodePool that allows default tenancy, keep theirs.
func TestDedicatedTenancyPrice(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	shared, ok := local.OnDemandPrice("m5.large", "us-east-1")
	require.True(t, ok)
	dedicated, ok := local.DedicatedPrice("m5.large", "us-east-1")
	require.True(t, ok)
	require.Greater(t, dedicated, shared)
	for _, tc := range []struct {
		name       string
		allowed    []string
		label      string
		wantOnDemd float64
	}{
		{name: "dedicated only", allowed: []string{awsv1.InstanceTenancyDedicated}, wantOnDemd: dedicated},
		{name: "dedicated by template label", label: awsv1.InstanceTenancyDedicated, wantOnDemd: dedicated},
		{name: "both", allowed: []string{awsv1.InstanceTenancyDefault, awsv1.InstanceTenancyDedicated}, wantOnDemd: shared},
		{name: "unconstrained", wantOnDemd: shared},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: e.nodeClass.Name}}}}}
			if tc.allowed != nil {
				pool.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
					{Key: awsv1.LabelInstanceTenancy, Operator: corev1.NodeSelectorOpIn, Values: tc.allowed}}
			}
			if tc.label != "" {
				pool.Spec.Template.Labels = map[string]v1.LabelValue{awsv1.LabelInstanceTenancy: v1.LabelValue(tc.label)}
			}
			its, err := e.cp.GetInstanceTypes(ctx, pool)
			require.NoError(t, err)
			found := false
			for _, it := range its {
				if it.Name != "m5.large" {
					continue
				}
				for _, o := range it.Offerings {
					switch o.CapacityType {
					case scheduling.CapacityTypeOnDemand:
						found = true
						assert.InDelta(t, tc.wantOnDemd, o.Price, 1e-9, o.Zone)
					case scheduling.CapacityTypeSpot:
						assert.Less(t, o.Price, shared, "spot keeps its price")
					}
				}
			}
			require.True(t, found, "m5.large has an on-demand offering")
		})
	}
}
