package instancetypes_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// TestClassSettingsFilterTypes: connection tracking lists only the Nitro
// types the local EC2 describes, and nested virtualization only the types
// whose processor lists the feature; the same provider still lists every
// type for a plain class.
func TestClassSettingsFilterTypes(t *testing.T) {
	ctx := context.Background()
	p := newProvider(instancetypes.Options{})
	hypervisor := map[string]ec2types.InstanceTypeHypervisor{}
	nestedOK := map[string]bool{}
	pages := ec2.NewDescribeInstanceTypesPaginator(ec2API, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		require.NoError(t, err)
		for _, info := range page.InstanceTypes {
			hypervisor[string(info.InstanceType)] = info.Hypervisor
			if info.ProcessorInfo != nil {
				for _, f := range info.ProcessorInfo.SupportedFeatures {
					if f == ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization {
						nestedOK[string(info.InstanceType)] = true
					}
				}
			}
		}
	}

	plain, err := p.List(ctx, twoZoneClass("plain"))
	require.NoError(t, err)
	xen := 0
	for _, it := range plain {
		if hypervisor[it.Name] == ec2types.InstanceTypeHypervisorXen {
			xen++
		}
	}
	require.Greater(t, xen, 0, "the plain class lists Xen types")

	tracked := twoZoneClass("tracked")
	tracked.Spec.ConnectionTracking = &awsv1.ConnectionTracking{UDPTimeout: aws.Int32(30)}
	its, err := p.List(ctx, tracked)
	require.NoError(t, err)
	require.NotEmpty(t, its)
	assert.Equal(t, len(plain)-xen-countMetal(plain, hypervisor), len(its))
	for _, it := range its {
		assert.Equal(t, ec2types.InstanceTypeHypervisorNitro, hypervisor[it.Name], it.Name)
	}

	nested := twoZoneClass("nested")
	nested.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: aws.String("enabled")}
	its, err = p.List(ctx, nested)
	require.NoError(t, err)
	require.NotEmpty(t, its)
	assert.Less(t, len(its), len(plain))
	for _, it := range its {
		assert.True(t, nestedOK[it.Name], it.Name)
	}

	off := twoZoneClass("nested-off")
	off.Spec.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: aws.String("disabled")}
	its, err = p.List(ctx, off)
	require.NoError(t, err)
	assert.Len(t, its, len(plain))
}

// countMetal counts the listed types EC2 gives no hypervisor (bare metal).
func countMetal(its []*scheduling.InstanceType, hypervisor map[string]ec2types.InstanceTypeHypervisor) int {
	n := 0
	for _, it := range its {
		if hypervisor[it.Name] == "" {
			n++
		}
	}
	return n
}
