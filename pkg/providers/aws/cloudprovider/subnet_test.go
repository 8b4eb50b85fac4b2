package cloudprovider_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/test/awslocal"
)

// otherZone has the default subnet the full one's zone falls back to.
const otherZone = "us-east-1b"

// fullSubnet is a /28 in zone (11 addresses, as in EC2) that instances
// launched straight into it have filled, terminated at the end.
func fullSubnet(t *testing.T) ec2types.Subnet {
	t.Helper()
	ctx := context.Background()
	s, err := local.NewSubnet(ctx, zone, 28, nil)
	require.NoError(t, err)
	image, ok := local.LatestImage(awslocal.Series{Family: awslocal.FamilyAL2023, KubernetesVersion: "1.33", Arch: "x86_64", Variant: "standard"})
	require.True(t, ok)
	ids, err := local.ExhaustSubnet(ctx, aws.ToString(s.SubnetId), image.ID, "t3.micro", nil)
	t.Cleanup(func() {
		if len(ids) > 0 {
			_, _ = ec2API.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: ids})
		}
	})
	require.NoError(t, err)
	require.Zero(t, freeAddresses(t, aws.ToString(s.SubnetId)))
	return s
}

func freeAddresses(t *testing.T, subnetID string) int32 {
	t.Helper()
	out, err := ec2API.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	require.NoError(t, err)
	require.Len(t, out.Subnets, 1)
	return aws.ToInt32(out.Subnets[0].AvailableIpAddressCount)
}

func defaultSubnet(t *testing.T, zone string) ec2types.Subnet {
	t.Helper()
	out, err := ec2API.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{zone}}, {Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	require.NoError(t, err)
	require.NotEmpty(t, out.Subnets)
	return out.Subnets[0]
}

// TestSubnetOutOfAddresses: EC2 refuses the overrides in a subnet without
// free addresses (InsufficientFreeAddressesInSubnet); the offering is
// cached unavailable as for any insufficient capacity, the launch goes to
// another zone when the NodeClaim allows one, and it fails with an
// insufficient-capacity error when not. Either way exactly the one
// instance Create returned exists, or none.
func TestSubnetOutOfAddresses(t *testing.T) {
	full := fullSubnet(t)
	fullID := aws.ToString(full.SubnetId)
	cases := []struct {
		name    string
		subnets []ec2types.Subnet
		// wantZone is where the instance launches; "" means Create fails.
		wantZone string
	}{
		{"another zone has addresses", []ec2types.Subnet{full, defaultSubnet(t, otherZone)}, otherZone},
		{"the only subnet is full", []ec2types.Subnet{full}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvIn(t, ec2API, tc.subnets)
			order := e.byPrice(t)
			nc := e.nodeClaim(t)
			got, err := e.cp.Create(ctx, nc)
			insts := instancesOf(t, nc.Name)
			fullKey := cloudprovider.OfferingKey{InstanceType: order[0], Zone: zone, CapacityType: instance.CapacityTypeOnDemand}
			assert.True(t, e.unavailable.IsUnavailable(fullKey), "the offering in the full subnet is cached unavailable")
			assert.Zero(t, freeAddresses(t, fullID), "nothing launched into the full subnet")
			if tc.wantZone == "" {
				require.Error(t, err)
				assert.True(t, cloudprovider.IsInsufficientCapacityError(err), "got %v", err)
				assert.Contains(t, err.Error(), "InsufficientFreeAddressesInSubnet")
				assert.Empty(t, insts, "no instance left behind")
				for _, it := range order {
					assert.True(t, e.unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: it, Zone: zone, CapacityType: instance.CapacityTypeOnDemand}), it)
				}
				return
			}
			require.NoError(t, err)
			require.Len(t, insts, 1, "one instance for the nodeclaim: no leak, no duplicate")
			assert.Equal(t, tc.wantZone, got.Labels[corev1.LabelTopologyZone])
			assert.Equal(t, tc.wantZone, aws.ToString(insts[0].Placement.AvailabilityZone))
			assert.Equal(t, "aws:///"+tc.wantZone+"/"+aws.ToString(insts[0].InstanceId), got.Status.ProviderID)
			assert.Equal(t, order[0], got.Labels[corev1.LabelInstanceTypeStable], "the cheapest type, in the zone with addresses")
			assert.False(t, e.unavailable.IsUnavailable(cloudprovider.OfferingKey{InstanceType: order[0], Zone: tc.wantZone, CapacityType: instance.CapacityTypeOnDemand}))

			// Retried (the lifecycle's next reconcile), Create returns the
			// same instance and launches nothing.
			fleets := local.Calls("ec2", "CreateFleet")
			again, err := e.cp.Create(ctx, nc)
			require.NoError(t, err)
			assert.Equal(t, got.Status.ProviderID, again.Status.ProviderID)
			assert.Equal(t, fleets, local.Calls("ec2", "CreateFleet"))
			assert.Len(t, instancesOf(t, nc.Name), 1)
			cleanup(t, e, got)
		})
	}
}
