package awslocal

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// DiscoveryTagKey is the tag the examples' EC2NodeClass selects subnets and
// security groups by, as in upstream's getting-started guide.
const DiscoveryTagKey = "karpenter.sh/discovery"

// ClusterOptions describe the AWS side of a cluster, as the infrastructure
// code of a real one would create it.
type ClusterOptions struct {
	// Name is the cluster's name: the discovery tag's value, the EKS
	// cluster's name and the node role's suffix.
	Name string
	// ServiceCIDR is the cluster's service CIDR, which EKS DescribeCluster
	// reports and AL2023 nodes bootstrap with.
	ServiceCIDR string
	// Zones get one discovery-tagged subnet each; empty means us-east-1a,
	// us-east-1b and us-east-1c.
	Zones []string
	// KubernetesVersion is the EKS record's version ("1.34"); empty leaves
	// moto's default.
	KubernetesVersion string
}

// Cluster is what SeedCluster created.
type Cluster struct {
	VPCID            string
	SubnetIDs        []string
	SecurityGroupIDs []string
	// NodeRole is KarpenterNodeRole-<name>, the examples' spec.role.
	NodeRole string
}

// SeedCluster creates a cluster's AWS resources through the SDK: a VPC with
// a discovery-tagged subnet per zone, a discovery-tagged security group, the
// node role, and an EKS cluster record with the service CIDR. The EKS
// endpoint moto reports is not the local API server: the controller is
// given CLUSTER_ENDPOINT, and reads only the CIDR and CA from EKS.
func (l *Local) SeedCluster(ctx context.Context, o ClusterOptions) (Cluster, error) {
	if o.Name == "" {
		return Cluster{}, fmt.Errorf("seeding a cluster: no name")
	}
	if len(o.Zones) == 0 {
		o.Zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	}
	l.warm()
	cfg := l.Config(ctx)
	ec2api, iamapi, eksapi := ec2.NewFromConfig(cfg), iam.NewFromConfig(cfg), eks.NewFromConfig(cfg)
	tag := func(rt ec2types.ResourceType, name string) []ec2types.TagSpecification {
		return []ec2types.TagSpecification{{ResourceType: rt, Tags: []ec2types.Tag{
			{Key: aws.String(DiscoveryTagKey), Value: aws.String(o.Name)},
			{Key: aws.String("Name"), Value: aws.String(name)},
		}}}
	}
	vpc, err := ec2api.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.200.0.0/16"),
		TagSpecifications: tag(ec2types.ResourceTypeVpc, o.Name)})
	if err != nil {
		return Cluster{}, fmt.Errorf("creating the VPC of %s: %w", o.Name, err)
	}
	c := Cluster{VPCID: aws.ToString(vpc.Vpc.VpcId), NodeRole: "KarpenterNodeRole-" + o.Name}
	for i, zone := range o.Zones {
		// /20s: 4,091 addresses each, enough for the benchmarks' fleets.
		out, err := ec2api.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId,
			CidrBlock: aws.String(fmt.Sprintf("10.200.%d.0/20", i*16)), AvailabilityZone: aws.String(zone),
			TagSpecifications: tag(ec2types.ResourceTypeSubnet, o.Name+"-"+zone)})
		if err != nil {
			return Cluster{}, fmt.Errorf("creating the subnet of %s in %s: %w", o.Name, zone, err)
		}
		c.SubnetIDs = append(c.SubnetIDs, aws.ToString(out.Subnet.SubnetId))
	}
	sg, err := ec2api.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(o.Name + "-nodes"),
		Description: aws.String("nodes of " + o.Name), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: tag(ec2types.ResourceTypeSecurityGroup, o.Name+"-nodes")})
	if err != nil {
		return Cluster{}, fmt.Errorf("creating the security group of %s: %w", o.Name, err)
	}
	c.SecurityGroupIDs = []string{aws.ToString(sg.GroupId)}
	if _, err := iamapi.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(c.NodeRole),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		return Cluster{}, fmt.Errorf("creating the node role of %s: %w", o.Name, err)
	}
	in := &eks.CreateClusterInput{Name: aws.String(o.Name), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks-" + o.Name),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: c.SubnetIDs, SecurityGroupIds: c.SecurityGroupIDs}}
	if o.KubernetesVersion != "" {
		in.Version = aws.String(o.KubernetesVersion)
	}
	if o.ServiceCIDR != "" {
		in.KubernetesNetworkConfig = &ekstypes.KubernetesNetworkConfigRequest{ServiceIpv4Cidr: aws.String(o.ServiceCIDR)}
	}
	if _, err := eksapi.CreateCluster(ctx, in); err != nil {
		return Cluster{}, fmt.Errorf("creating the EKS cluster record of %s: %w", o.Name, err)
	}
	return c, nil
}
