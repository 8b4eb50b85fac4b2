//go:build kwokonly

package main

import (
	"context"
	"errors"
	"flag"

	"k8s.io/client-go/rest"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/operator"
	"github.com/karpenter-go/karpenter/pkg/operator/options"
)

// errNoAWS is --cloud-provider=aws in a build without the AWS provider.
var errNoAWS = errors.New("this controller is built without the AWS provider (build tag kwokonly): --cloud-provider=aws needs the default build")

// awsProvider is absent from this build: no flags, and asking for it fails.
type awsProvider struct{}

func addAWSFlags(*flag.FlagSet) awsProvider { return awsProvider{} }

func (awsProvider) parse(*flag.FlagSet, func(string) (string, bool), ...string) error {
	return errNoAWS
}

func (awsProvider) start(context.Context, *operator.Operator, *rest.Config, *options.Options, *cloudprovider.UnavailableOfferings) (cloudprovider.CloudProvider, []string, string, error) {
	return nil, nil, "", errNoAWS
}
