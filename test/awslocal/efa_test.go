package awslocal_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCreateFleetEFAInterfaces: a template with two EFA interfaces launches
// on a type with EFA and the instance is described with them; on a type
// without EFA, or with too few network cards, the pool fails as EC2's does.
func TestCreateFleetEFAInterfaces(t *testing.T) {
	e := newFleetEnv(t, func(d *ec2types.RequestLaunchTemplateData) {
		d.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			{NetworkCardIndex: aws.Int32(0), DeviceIndex: aws.Int32(0), InterfaceType: aws.String("efa"), Groups: d.SecurityGroupIds},
			{NetworkCardIndex: aws.Int32(1), DeviceIndex: aws.Int32(1), InterfaceType: aws.String("efa"), Groups: d.SecurityGroupIds},
		}
		d.SecurityGroupIds = nil
	})
	out, err := e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("m5.large"))
	require.NoError(t, err)
	assert.Empty(t, out.Instances)
	require.NotEmpty(t, out.Errors)
	assert.Equal(t, "InvalidParameterCombination", aws.ToString(out.Errors[0].ErrorCode))

	out, err = e.fleet(t, ec2types.DefaultTargetCapacityTypeOnDemand, e.overrides("p4d.24xlarge"))
	require.NoError(t, err)
	require.Empty(t, out.Errors)
	insts := e.tagged(t)
	require.Len(t, insts, 1)
	var got []string
	for _, ni := range insts[0].NetworkInterfaces {
		got = append(got, aws.ToString(ni.InterfaceType))
		require.NotNil(t, ni.Attachment)
	}
	assert.Equal(t, []string{"efa", "efa"}, got)
	assert.EqualValues(t, 1, aws.ToInt32(insts[0].NetworkInterfaces[1].Attachment.NetworkCardIndex))
}
