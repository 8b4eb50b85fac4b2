// Command controller is the Karpenter controller with the simulated kwok
// cloud provider: it parses flags and environment, builds the operator,
// registers the controllers and runs until SIGINT/SIGTERM.
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

	cpmetrics "github.com/karpenter-go/karpenter/pkg/cloudprovider/metrics"
	"github.com/karpenter-go/karpenter/pkg/controllers"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodeclaim/lifecycle"
	"github.com/karpenter-go/karpenter/pkg/operator"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
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
	var kwokOpts kwok.Options
	if err := kwokOpts.AddFlags(fs); err != nil {
		return fmt.Errorf("kwok options: %w", err)
	}
	if err := opts.Parse(fs, lookupEnv, args...); err != nil {
		return err
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
	unavailable := lifecycle.NewUnavailableOfferings(op.Clock, 0)
	kwokOpts.Unavailable = unavailable.IsUnavailable
	provider, err := kwok.New(ctx, op.Client, kwokOpts)
	if err != nil {
		return fmt.Errorf("building kwok cloud provider: %w", err)
	}
	if _, err := controllers.Register(ctx, op, controllers.Shared{
		CloudProvider: cpmetrics.Decorate(provider),
		Unavailable:   unavailable,
		// The solver is pure: the provider's label keys reach it through
		// the input, not through a global it registered at init.
		WellKnownLabels: kwok.WellKnownLabels(),
	}); err != nil {
		return err
	}
	op.Logger.Info("starting controller", "version", operator.Version, "cloud-provider", provider.Name())
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
