package cloudprovider

import (
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

var _ cloudprovider.ClassDrifter = (*CloudProvider)(nil)

// StaticDrift implements cloudprovider.ClassDrifter: the package's
// StaticDrift for an EC2NodeClass, none for any other kind.
func (c *CloudProvider) StaticDrift(nc *v1.NodeClaim, nodeClass cloudprovider.NodeClass) cloudprovider.DriftReason {
	class, ok := nodeClass.(*awsv1.EC2NodeClass)
	if !ok {
		return ""
	}
	return StaticDrift(nc, class)
}
