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

// TestEnsureEFAInterfaces: a launch with EFA interfaces gets one EFA
// interface per network card, the primary on card 0 device 0 and the rest
// on device 1, each with the groups; the count is part of the template's
// name.
func TestEnsureEFAInterfaces(t *testing.T) {
	nc := readyNodeClass("efa", awsv1.AMIFamilyAL2023)
	launch := launchFor("efa", 110)
	plain := resolve(t, nc, launch)
	launch.EFACount = 4
	o := resolve(t, nc, launch)
	plainName, err := launchtemplate.Name(plain)
	require.NoError(t, err)
	efaName, err := launchtemplate.Name(o)
	require.NoError(t, err)
	assert.NotEqual(t, plainName, efaName)
	lt, err := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(context.Background(), o)
	require.NoError(t, err)
	data := describeVersion(t, lt.Name)
	assert.Empty(t, data.SecurityGroupIds)
	require.Len(t, data.NetworkInterfaces, 4)
	for i, ni := range data.NetworkInterfaces {
		assert.EqualValues(t, i, aws.ToInt32(ni.NetworkCardIndex))
		wantDevice := int32(1)
		if i == 0 {
			wantDevice = 0
		}
		assert.Equal(t, wantDevice, aws.ToInt32(ni.DeviceIndex))
		assert.Equal(t, "efa", aws.ToString(ni.InterfaceType))
		assert.ElementsMatch(t, []string{"sg-0000000000000000a", "sg-0000000000000000b"}, ni.Groups)
	}
}

// TestEnsureInterfaceLayout: a class's networkInterfaces reach the template
// as laid out (card, device index, type), the primary with the primary's
// settings (here IPv4 prefixes), every interface with the groups and none
// on the template; the layout wins over a launch's EFA count, and changing
// it names another template.
func TestEnsureInterfaceLayout(t *testing.T) {
	nc := readyNodeClass("layout", awsv1.AMIFamilyAL2023)
	nc.Spec.IPPrefixCount = aws.Int32(1)
	nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
		{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
		{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		{NetworkCardIndex: 2, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
	}
	launch := launchFor("layout", 110)
	launch.EFACount = 4
	o := resolve(t, nc, launch)
	lt, err := launchtemplate.NewProvider(clients.EC2, cluster.Name, launchtemplate.ProviderOptions{}).Ensure(context.Background(), o)
	require.NoError(t, err)
	data := describeVersion(t, lt.Name)
	assert.Empty(t, data.SecurityGroupIds)
	type iface struct {
		card, device int32
		typ          string
	}
	var got []iface
	for _, ni := range data.NetworkInterfaces {
		got = append(got, iface{aws.ToInt32(ni.NetworkCardIndex), aws.ToInt32(ni.DeviceIndex), aws.ToString(ni.InterfaceType)})
		assert.ElementsMatch(t, []string{"sg-0000000000000000a", "sg-0000000000000000b"}, ni.Groups)
		isPrimary := aws.ToInt32(ni.NetworkCardIndex) == 0 && aws.ToInt32(ni.DeviceIndex) == 0
		assert.Equal(t, isPrimary, ni.Ipv4PrefixCount != nil, "prefixes on the primary only")
	}
	assert.Equal(t, []iface{{0, 0, "interface"}, {0, 1, "efa-only"}, {1, 0, "efa-only"}, {2, 0, "interface"}}, got)

	other := readyNodeClass("layout", awsv1.AMIFamilyAL2023)
	other.Spec.IPPrefixCount = aws.Int32(1)
	other.Spec.NetworkInterfaces = nc.Spec.NetworkInterfaces[:2]
	a, err := launchtemplate.Name(o)
	require.NoError(t, err)
	b, err := launchtemplate.Name(resolve(t, other, launch))
	require.NoError(t, err)
	assert.NotEqual(t, a, b, "the layout is part of the template's name")
}
