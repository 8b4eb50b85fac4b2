package launchtemplate_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/launchtemplate"
)

// TestEnsureInterfaceAndCPUOptions: ipPrefixCount, connectionTracking and
// cpuOptions reach the template the local EC2 stores, on the primary
// interface with the groups (IPv4 prefixes in an IPv4 cluster, IPv6
// prefixes plus a primary IPv6 address in an IPv6 one); a class without
// them keeps its groups on the template and says nothing of CPU options.
func TestEnsureInterfaceAndCPUOptions(t *testing.T) {
	ipv6 := cluster
	ipv6.DNS = "fd00:10:100::a"
	for _, tc := range []struct {
		name    string
		cluster launchtemplate.Cluster
		mutate  func(*awsv1.EC2NodeClass)
		check   func(t *testing.T, data *ec2types.ResponseLaunchTemplateData)
	}{
		{"nothing set: groups on the template", cluster, func(*awsv1.EC2NodeClass) {}, func(t *testing.T, data *ec2types.ResponseLaunchTemplateData) {
			assert.Empty(t, data.NetworkInterfaces)
			assert.Len(t, data.SecurityGroupIds, 2)
			assert.Nil(t, data.CpuOptions)
		}},
		{"IPv4 prefixes and connection tracking", cluster, func(nc *awsv1.EC2NodeClass) {
			nc.Spec.IPPrefixCount = aws.Int32(2)
			nc.Spec.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: aws.Int32(600), UDPTimeout: aws.Int32(45)}
		}, func(t *testing.T, data *ec2types.ResponseLaunchTemplateData) {
			require.Len(t, data.NetworkInterfaces, 1)
			ni := data.NetworkInterfaces[0]
			assert.EqualValues(t, 0, aws.ToInt32(ni.DeviceIndex))
			assert.ElementsMatch(t, []string{"sg-0000000000000000a", "sg-0000000000000000b"}, ni.Groups)
			assert.Empty(t, data.SecurityGroupIds)
			assert.EqualValues(t, 2, aws.ToInt32(ni.Ipv4PrefixCount))
			assert.Nil(t, ni.Ipv6PrefixCount)
			require.NotNil(t, ni.ConnectionTrackingSpecification)
			assert.EqualValues(t, 600, aws.ToInt32(ni.ConnectionTrackingSpecification.TcpEstablishedTimeout))
			assert.EqualValues(t, 45, aws.ToInt32(ni.ConnectionTrackingSpecification.UdpTimeout))
			assert.Nil(t, ni.ConnectionTrackingSpecification.UdpStreamTimeout)
		}},
		{"IPv6 cluster: IPv6 prefixes and a primary IPv6 address", ipv6, func(nc *awsv1.EC2NodeClass) {
			nc.Spec.IPPrefixCount = aws.Int32(1)
		}, func(t *testing.T, data *ec2types.ResponseLaunchTemplateData) {
			require.Len(t, data.NetworkInterfaces, 1)
			ni := data.NetworkInterfaces[0]
			assert.Nil(t, ni.Ipv4PrefixCount)
			assert.EqualValues(t, 1, aws.ToInt32(ni.Ipv6PrefixCount))
			assert.True(t, aws.ToBool(ni.PrimaryIpv6))
			assert.EqualValues(t, 1, aws.ToInt32(ni.Ipv6AddressCount))
		}},
		{"nested virtualization", cluster, func(nc *awsv1.EC2NodeClass) {
			nc.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: aws.String("enabled")}
		}, func(t *testing.T, data *ec2types.ResponseLaunchTemplateData) {
			require.NotNil(t, data.CpuOptions)
			assert.Equal(t, ec2types.NestedVirtualizationSpecificationEnabled, data.CpuOptions.NestedVirtualization)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := readyNodeClass("iface", awsv1.AMIFamilyAL2023)
			tc.mutate(nc)
			o, err := launchtemplate.Resolve(context.Background(), nc, tc.cluster, launchFor("iface", 110))
			require.NoError(t, err)
			lt, err := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(context.Background(), o)
			require.NoError(t, err)
			data := describeVersion(t, lt.Name)
			tc.check(t, &data)
		})
	}
}
