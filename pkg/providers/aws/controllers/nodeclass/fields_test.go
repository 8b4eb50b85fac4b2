package nodeclass_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/nodeclass"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/pricing"
)

// TestFieldsSupportedWithNetworkInterfaces: launches lay a class's
// networkInterfaces out, so a class with a layout is Ready with
// FieldsSupported=True.
func TestFieldsSupportedWithNetworkInterfaces(t *testing.T) {
	prices := pricing.NewProvider(nil, clients.EC2, pricing.Options{Region: clients.Region})
	types := instancetypes.NewProvider(clients.EC2, prices, instancetypes.Options{Region: clients.Region, Settings: instancetype.DefaultSettings()})
	c, _ := newController(0, func(o *nodeclass.Options) { o.InstanceTypes = types })
	name := "fields-nis"
	newNodeClass(t, name, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.Role, nc.Spec.InstanceProfile = "", aws.String("fields-test")
		nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		}
	})
	reconcileOnce(t, c, name)
	got := get(t, name)
	fs := condition(got, nodeclass.ConditionTypeFieldsSupported)
	require.Equal(t, "True", string(fs.Status), "%+v", fs)
	require.Equal(t, "True", string(condition(got, awsv1.ConditionTypeReady).Status))
}
