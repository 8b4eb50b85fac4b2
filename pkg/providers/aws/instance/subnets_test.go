package instance_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
)

// erringFleets is an EC2 with no instances whose CreateFleet launches
// nothing and answers errs.
type erringFleets struct{ errs []ec2types.CreateFleetError }

func (f erringFleets) CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return &ec2.CreateFleetOutput{Errors: f.errs}, nil
}

func (erringFleets) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return &ec2.DescribeInstancesOutput{}, nil
}

func (erringFleets) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return &ec2.TerminateInstancesOutput{}, nil
}

func (erringFleets) CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	return &ec2.CreateTagsOutput{}, nil
}

type recorder struct {
	mu          sync.Mutex
	exhausted   []string
	unavailable []cloudprovider.OfferingKey
}

func (r *recorder) MarkExhausted(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exhausted = append(r.exhausted, id)
}

func (r *recorder) MarkUnavailable(k cloudprovider.OfferingKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unavailable = append(r.unavailable, k)
}

func fleetError(code, it, subnet string) ec2types.CreateFleetError {
	return ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String(code),
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{
			Overrides: &ec2types.FleetLaunchTemplateOverrides{InstanceType: ec2types.InstanceType(it), SubnetId: aws.String(subnet)}}}
}

// TestFullSubnetIsInsufficientCapacity: InsufficientFreeAddressesInSubnet
// marks the offering in that subnet's zone unavailable, like any
// insufficient capacity, and tells the subnet provider the subnet is full.
func TestFullSubnetIsInsufficientCapacity(t *testing.T) {
	cases := []struct {
		name          string
		errs          []ec2types.CreateFleetError
		wantExhausted []string
		wantICE       []cloudprovider.OfferingKey
	}{
		{
			name:          "full subnet",
			errs:          []ec2types.CreateFleetError{fleetError("InsufficientFreeAddressesInSubnet", "m5.large", "subnet-a")},
			wantExhausted: []string{"subnet-a"},
			wantICE:       []cloudprovider.OfferingKey{{InstanceType: "m5.large", Zone: "zone-a", CapacityType: "on-demand"}},
		},
		{
			name: "a full subnet and a type without capacity",
			errs: []ec2types.CreateFleetError{
				fleetError("InsufficientFreeAddressesInSubnet", "m5.large", "subnet-a"),
				fleetError("InsufficientInstanceCapacity", "m5.large", "subnet-b"),
			},
			wantExhausted: []string{"subnet-a"},
			wantICE: []cloudprovider.OfferingKey{
				{InstanceType: "m5.large", Zone: "zone-a", CapacityType: "on-demand"},
				{InstanceType: "m5.large", Zone: "zone-b", CapacityType: "on-demand"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			p := instance.NewProvider(erringFleets{tc.errs}, "c", rec, instance.WithSubnets(rec))
			_, err := p.Create(context.Background(), instance.Request{NodeClaimName: "nc", NodePoolName: "default", NodeClassName: "class",
				CapacityType: instance.CapacityTypeOnDemand, Configs: []instance.LaunchConfig{{LaunchTemplateName: "lt", Overrides: []instance.Override{
					{InstanceType: "m5.large", Zone: "zone-a", SubnetID: "subnet-a"},
					{InstanceType: "m5.large", Zone: "zone-b", SubnetID: "subnet-b"},
				}}}})
			require.Error(t, err)
			assert.True(t, cloudprovider.IsInsufficientCapacityError(err), "got %v", err)
			assert.Equal(t, tc.wantExhausted, rec.exhausted)
			assert.ElementsMatch(t, tc.wantICE, rec.unavailable)
		})
	}
}
