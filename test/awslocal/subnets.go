package awslocal

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// extraSubnets is where NewSubnet carves subnets out of moto's default VPC
// (172.31.0.0/16): above the default subnets, which take the /20s from
// 172.31.0.0 up, one per zone.
var extraSubnets = netip.MustParsePrefix("172.31.128.0/17")

// NewSubnet creates a subnet of the given prefix length (EC2 allows /16 to
// /28; a /28 has 11 usable addresses, as moto counts them too) in zone, in
// the default VPC, at the first block no other subnet uses, with tags.
// Tests use small ones to run a subnet out of addresses.
func (l *Local) NewSubnet(ctx context.Context, zone string, bits int, tags map[string]string) (ec2types.Subnet, error) {
	if bits < 16 || bits > 28 {
		return ec2types.Subnet{}, fmt.Errorf("subnet /%d: EC2 allows /16 to /28", bits)
	}
	api := ec2.NewFromConfig(l.Config(ctx))
	vpcs, err := api.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{{Name: aws.String("is-default"), Values: []string{"true"}}}})
	if err != nil {
		return ec2types.Subnet{}, fmt.Errorf("finding the default VPC: %w", err)
	}
	if len(vpcs.Vpcs) == 0 {
		return ec2types.Subnet{}, errors.New("finding the default VPC: moto has none")
	}
	var spec []ec2types.TagSpecification
	if len(tags) > 0 {
		s := ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeSubnet}
		for k, v := range tags {
			s.Tags = append(s.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		spec = []ec2types.TagSpecification{s}
	}
	b := extraSubnets.Addr().As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	size := uint32(1) << (32 - bits)
	for n := base; ; n += size {
		addr := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		if !extraSubnets.Contains(addr) {
			break
		}
		block := netip.PrefixFrom(addr, bits)
		out, err := api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpcs.Vpcs[0].VpcId, CidrBlock: aws.String(block.String()),
			AvailabilityZone: aws.String(zone), TagSpecifications: spec})
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidSubnet.Conflict" {
			continue // another test's subnet: try the next block
		}
		if err != nil {
			return ec2types.Subnet{}, fmt.Errorf("creating a /%d subnet in %s: %w", bits, zone, err)
		}
		return *out.Subnet, nil
	}
	return ec2types.Subnet{}, fmt.Errorf("creating a /%d subnet in %s: no free block left in %s", bits, zone, extraSubnets)
}

// ExhaustSubnet launches instances of instanceType from image straight
// into the subnet (RunInstances, not CreateFleet) until it has no free
// address left, tagged with tags, and returns their ids for cleanup.
func (l *Local) ExhaustSubnet(ctx context.Context, subnetID, imageID, instanceType string, tags map[string]string) ([]string, error) {
	api := ec2.NewFromConfig(l.Config(ctx))
	out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	if err != nil {
		return nil, fmt.Errorf("describing subnet %s: %w", subnetID, err)
	}
	if len(out.Subnets) == 0 {
		return nil, fmt.Errorf("subnet %s not found", subnetID)
	}
	free := aws.ToInt32(out.Subnets[0].AvailableIpAddressCount)
	if free <= 0 {
		return nil, nil
	}
	in := &ec2.RunInstancesInput{ImageId: aws.String(imageID), InstanceType: ec2types.InstanceType(instanceType),
		MinCount: aws.Int32(free), MaxCount: aws.Int32(free), SubnetId: aws.String(subnetID)}
	if len(tags) > 0 {
		s := ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeInstance}
		for k, v := range tags {
			s.Tags = append(s.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []ec2types.TagSpecification{s}
	}
	run, err := api.RunInstances(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("filling subnet %s with %d instances: %w", subnetID, free, err)
	}
	ids := make([]string, 0, len(run.Instances))
	for _, i := range run.Instances {
		ids = append(ids, aws.ToString(i.InstanceId))
	}
	return ids, nil
}
