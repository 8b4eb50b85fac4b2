package subnet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
)

// fixedSubnets answers DescribeSubnets with the same subnets whatever the
// filters, counting the calls.
type fixedSubnets struct {
	mu      sync.Mutex
	subnets []ec2types.Subnet
	calls   int
}

func (f *fixedSubnets) DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return &ec2.DescribeSubnetsOutput{Subnets: f.subnets}, nil
}

func sub(id, zone string, free int32) ec2types.Subnet {
	return ec2types.Subnet{SubnetId: aws.String(id), AvailabilityZone: aws.String(zone), AvailableIpAddressCount: aws.Int32(free)}
}

// launchStep is one launch: the subnets it is offered (zone → id), then
// what it tells the provider.
type launchStep struct {
	want      map[string]string
	exhausted string // subnet EC2 found full
	launched  string // subnet the instance went to, "" for none
	refresh   bool   // DescribeSubnets is asked again before the launch
}

func TestZonalSubnetsForLaunch(t *testing.T) {
	nodeClass := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{SubnetSelectorTerms: []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"k": "*"}}}}}
	cases := []struct {
		name    string
		subnets []ec2types.Subnet
		steps   []launchStep
	}{
		{
			name:    "most free addresses per zone",
			subnets: []ec2types.Subnet{sub("subnet-a1", "a", 10), sub("subnet-a2", "a", 200), sub("subnet-b1", "b", 0)},
			steps:   []launchStep{{want: map[string]string{"a": "subnet-a2", "b": "subnet-b1"}, launched: "subnet-a2"}},
		},
		{
			// Equal counts: the lower id, then the other while the first
			// launch's address is in flight; the unused zone's address is
			// handed back.
			name:    "in-flight launches spread over a zone",
			subnets: []ec2types.Subnet{sub("subnet-a2", "a", 5), sub("subnet-a1", "a", 5), sub("subnet-b1", "b", 5), sub("subnet-b2", "b", 4)},
			steps: []launchStep{
				{want: map[string]string{"a": "subnet-a1", "b": "subnet-b1"}, launched: "subnet-a1"},
				{want: map[string]string{"a": "subnet-a2", "b": "subnet-b1"}, launched: "subnet-a2"},
				{want: map[string]string{"a": "subnet-a1", "b": "subnet-b1"}},
			},
		},
		{
			name:    "a subnet EC2 found full comes last in its zone until DescribeSubnets says otherwise",
			subnets: []ec2types.Subnet{sub("subnet-a1", "a", 50), sub("subnet-a2", "a", 3)},
			steps: []launchStep{
				{want: map[string]string{"a": "subnet-a1"}, exhausted: "subnet-a1"},
				{want: map[string]string{"a": "subnet-a2"}, launched: "subnet-a2"},
				{want: map[string]string{"a": "subnet-a2"}, launched: "subnet-a2"},
				{want: map[string]string{"a": "subnet-a1"}, refresh: true},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := &fixedSubnets{subnets: tc.subnets}
			p := subnet.NewProvider(api, time.Hour)
			for i, step := range tc.steps {
				if step.refresh {
					p.Invalidate()
				}
				got, err := p.ZonalSubnetsForLaunch(context.Background(), nodeClass)
				require.NoError(t, err)
				require.Equal(t, step.want, got, "launch %d", i)
				if step.exhausted != "" {
					p.MarkExhausted(step.exhausted)
				}
				p.UpdateInflightIPs(got, step.launched)
			}
		})
	}
}
