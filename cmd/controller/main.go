// Command controller is the Karpenter controller: it parses flags and
// environment, builds the operator and the cloud provider the
// --cloud-provider flag (CLOUD_PROVIDER) names, aws or the simulated kwok,
// registers the controllers and runs until SIGINT/SIGTERM.
//
// Built with the tag kwokonly it links the simulated provider alone, as
// upstream's kwok controller is a binary of its own: no AWS SDK (its
// service descriptions are built at init, megabytes of heap for nothing
// in a simulated cluster) and no AWS flags. The image is the default
// build.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	cpmetrics "github.com/karpenter-go/karpenter/pkg/cloudprovider/metrics"
	"github.com/karpenter-go/karpenter/pkg/controllers"
	"github.com/karpenter-go/karpenter/pkg/operator"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
)

// Cloud providers --cloud-provider accepts.
const (
	ProviderAWS  = "aws"
	ProviderKWOK = "kwok"
)

func main() {
	if err := Run(signals.SetupSignalHandler(), os.Args[1:], os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Run is the whole program: it returns when ctx ends (nil after a clean
// shutdown) or when something fails.
func Run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	opts := options.New()
	opts.AddFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig; empty means $KUBECONFIG, in-cluster, then ~/.kube/config")
	provider := fs.String("cloud-provider", ProviderKWOK, "the cloud provider: aws (EC2, with the AWS settings below) or kwok (simulated nodes); env CLOUD_PROVIDER")
	var kwokOpts kwok.Options
	if err := kwokOpts.AddFlags(fs); err != nil {
		return fmt.Errorf("kwok options: %w", err)
	}
	aws := addAWSFlags(fs)
	if v, ok := lookupEnv("CLOUD_PROVIDER"); ok {
		*provider = v
	}
	if err := opts.Parse(fs, lookupEnv, args...); err != nil {
		return err
	}
	switch *provider {
	case ProviderKWOK:
	case ProviderAWS:
		// The AWS settings' environment and validation (CLUSTER_NAME is
		// required) apply only when they are used.
		if err := aws.parse(fs, lookupEnv, args...); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown --cloud-provider %q (known: %s, %s)", *provider, ProviderAWS, ProviderKWOK)
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	op, err := operator.New(ctx, cfg, opts)
	if err != nil {
		return fmt.Errorf("building operator: %w", err)
	}
	ctx = op.Context(ctx)
	// One insufficient-capacity cache for everyone: the lifecycle fills it
	// on ICE, the provider and the provisioner skip what it holds.
	unavailable := cloudprovider.NewUnavailableOfferings(op.Clock, 0)
	var cloud cloudprovider.CloudProvider
	var wellKnown []string
	reservationKey := ""
	switch *provider {
	case ProviderAWS:
		if cloud, wellKnown, reservationKey, err = aws.start(ctx, op, cfg, opts, unavailable); err != nil {
			return err
		}
	default:
		kwokOpts.Unavailable = unavailable.IsUnavailable
		p, err := kwok.New(ctx, op.Client, kwokOpts)
		if err != nil {
			return fmt.Errorf("building kwok cloud provider: %w", err)
		}
		cloud, wellKnown = p, kwok.WellKnownLabels()
	}
	if _, err := controllers.Register(ctx, controllers.Runtime{
		Manager: op.Manager, Client: op.Client, Clock: op.Clock, EventRecorder: op.EventRecorder, Options: op.Options,
	}, controllers.Shared{
		CloudProvider: cpmetrics.Decorate(cloud),
		Unavailable:   unavailable,
		// The solver is pure: the provider's label keys reach it through
		// the input, not through a global it registered at init.
		WellKnownLabels:    wellKnown,
		ReservationIDLabel: reservationKey,
	}); err != nil {
		return err
	}
	op.Logger.Info("starting controller", "version", operator.Version, "cloud-provider", cloud.Name())
	return op.Start(ctx)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kube config: %w", err)
	}
	return cfg, nil
}
