//go:build !kwokonly

package main

import (
	"context"
	"flag"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/operator"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
	awsoperator "github.com/karpenter-go/karpenter/pkg/providers/aws/operator"
	awsoptions "github.com/karpenter-go/karpenter/pkg/providers/aws/options"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/sdk"
)

// awsProvider is the AWS provider's settings, registered as flags.
type awsProvider struct{ opts *awsoptions.Options }

func addAWSFlags(fs *flag.FlagSet) awsProvider {
	p := awsProvider{opts: awsoptions.New()}
	p.opts.AddFlags(fs)
	return p
}

func (p awsProvider) parse(fs *flag.FlagSet, lookupEnv func(string) (string, bool), args ...string) error {
	if err := p.opts.Parse(fs, lookupEnv, args...); err != nil {
		return fmt.Errorf("aws settings: %w", err)
	}
	return nil
}

// start builds the AWS provider and registers its controllers; it returns
// the cloud provider, its well-known labels and its reservation label.
func (p awsProvider) start(ctx context.Context, op *operator.Operator, cfg *rest.Config, opts *options.Options, unavailable *cloudprovider.UnavailableOfferings) (cloudprovider.CloudProvider, []string, string, error) {
	awsCfg, err := sdk.Load(ctx, sdk.Settings{})
	if err != nil {
		return nil, nil, "", err
	}
	provider, err := awsoperator.New(ctx, awsoperator.Options{
		Kube: op.Client, RestConfig: cfg, AWS: awsCfg, Settings: p.opts,
		Unavailable: unavailable, Clock: op.Clock, Logger: op.Logger.WithName("aws"),
		ReservedCapacity: opts.FeatureGates.ReservedCapacity,
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("building aws cloud provider: %w", err)
	}
	if err := provider.Register(ctx, op.Manager); err != nil {
		return nil, nil, "", err
	}
	// Lead only with instance types loaded: the first round after a
	// start or a leader change does not wait for EC2.
	op.HoldLeadership(provider.Warm())
	op.Logger.Info("discovered cluster", "cluster", provider.Cluster.Name, "endpoint", provider.Cluster.Endpoint, "service-cidr", provider.Cluster.CIDR, "region", awsCfg.Region)
	return provider.CloudProvider, awsoperator.WellKnownLabels(), awsoperator.ReservationIDLabel(), nil
}
