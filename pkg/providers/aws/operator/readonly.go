package operator

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	awscloudprovider "github.com/karpenter-go/karpenter/pkg/providers/aws/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetype"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instancetypes"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/options"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/pricing"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
)

// ReadOnly is the AWS provider as a reader needs it, the karpenter CLI:
// the instance types and prices of any EC2NodeClass it is given (through
// kube), resolved with the caller's AWS configuration, and the static drift
// of a class (cloudprovider.ClassDrifter). It calls AWS only when instance
// types are asked for, and only to describe; every launch, delete or list
// of instances it is asked for is the full provider's and fails here for
// want of launch templates and instances.
type ReadOnly struct {
	*awscloudprovider.CloudProvider
	prices *pricing.Provider
	once   sync.Once
}

var _ cloudprovider.ClassDrifter = (*ReadOnly)(nil)

// NewReadOnly builds the read-only provider from awsCfg (the SDK's default
// chain for the CLI). settings are the controller's AWS settings as far as
// the reader knows them (instance types' memory overhead and reserved ENIs;
// the defaults when nil).
func NewReadOnly(awsCfg aws.Config, kube client.Reader, settings *options.Options) *ReadOnly {
	if settings == nil {
		settings = options.New()
	}
	clients := sdk.New(awsCfg, 0)
	var pricingAPI pricing.API
	if !settings.IsolatedVPC {
		pricingAPI = pricing.NewAPI(awsCfg)
	}
	prices := pricing.NewProvider(pricingAPI, clients.EC2, pricing.Options{Region: clients.Region, IsolatedVPC: settings.IsolatedVPC})
	types := instancetypes.NewProvider(clients.EC2, prices, instancetypes.Options{
		Region:   clients.Region,
		Settings: instancetype.Settings{VMMemoryOverheadPercent: settings.VMMemoryOverheadPercent, ReservedENIs: settings.ReservedENIs},
	})
	return &ReadOnly{
		CloudProvider: awscloudprovider.New(awscloudprovider.Options{Kube: kube, InstanceTypes: types}),
		prices:        prices,
	}
}

// GetInstanceTypes implements cloudprovider.CloudProvider. The first call
// fetches prices once, as the controller's refresher does at start; when
// that fails the static price table stands, as it does for the
// controller until its next refresh.
func (r *ReadOnly) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	r.once.Do(func() { _ = r.prices.Tick(ctx) })
	return r.CloudProvider.GetInstanceTypes(ctx, np)
}
