package instancetype

import (
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// New builds the solver's instance type for one DescribeInstanceTypes
// record and EC2NodeClass. Offerings are left empty: prices, zones'
// availability and the insufficient-capacity cache are the caller's.
// zones are where the type may launch (offered there and covered by the
// class's subnets).
func New(info ec2types.InstanceTypeInfo, nodeClass *awsv1.EC2NodeClass, region string, zones []Zone, settings Settings) (*scheduling.InstanceType, error) {
	res, err := Compute(info, nodeClass, settings)
	if err != nil {
		return nil, err
	}
	reqs, err := Requirements(info, nodeClass.AMIFamily(), region, zones, nodeClass.Status.CapacityReservations)
	if err != nil {
		return nil, err
	}
	return &scheduling.InstanceType{
		Name:         string(info.InstanceType),
		Requirements: reqs,
		Capacity:     res.Capacity,
		Overhead:     res.Overhead(),
	}, nil
}
