package subnet_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/subnet"
)

func TestFilterSets(t *testing.T) {
	got := subnet.FilterSets([]awsv1.SubnetSelectorTerm{
		{Tags: map[string]string{"b": "*", "a": "x"}},
		{ID: "subnet-1"},
		{ID: "subnet-2"},
	})
	assert.Equal(t, [][]ec2types.Filter{
		{{Name: aws.String("tag:a"), Values: []string{"x"}}, {Name: aws.String("tag-key"), Values: []string{"b"}}},
		{{Name: aws.String("subnet-id"), Values: []string{"subnet-1", "subnet-2"}}},
	}, got)
}

func TestStatusOrder(t *testing.T) {
	s := func(id string, ips int32) ec2types.Subnet {
		return ec2types.Subnet{SubnetId: aws.String(id), AvailableIpAddressCount: aws.Int32(ips), AvailabilityZone: aws.String("z-" + id), AvailabilityZoneId: aws.String("zid-" + id)}
	}
	got := subnet.Status([]ec2types.Subnet{s("subnet-c", 10), s("subnet-b", 250), s("subnet-a", 10)})
	assert.Equal(t, []awsv1.Subnet{
		{ID: "subnet-b", Zone: "z-subnet-b", ZoneID: "zid-subnet-b"},
		{ID: "subnet-a", Zone: "z-subnet-a", ZoneID: "zid-subnet-a"},
		{ID: "subnet-c", Zone: "z-subnet-c", ZoneID: "zid-subnet-c"},
	}, got)
}
