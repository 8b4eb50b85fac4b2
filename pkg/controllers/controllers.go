// Package controllers wires every controller onto the operator's manager.
// It is the one place that decides which controllers run and what they
// share (the cluster-state cache, the cloud provider).
package controllers

import (
	"context"
	"fmt"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/operator"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// Register builds the shared cluster-state cache and registers the
// controllers on op's manager. cloudProvider should already carry the
// metrics decorator.
func Register(ctx context.Context, op *operator.Operator, cloudProvider cloudprovider.CloudProvider) error {
	_, err := RegisterWithCluster(ctx, op, cloudProvider)
	return err
}

// RegisterWithCluster is Register, also returning the cluster-state cache
// for callers (tests, tooling) that want to observe it.
func RegisterWithCluster(ctx context.Context, op *operator.Operator, cloudProvider cloudprovider.CloudProvider) (*state.Cluster, error) {
	if cloudProvider == nil {
		return nil, fmt.Errorf("registering controllers: no cloud provider")
	}
	cluster := state.NewCluster(op.Clock, op.Client, state.Options{
		BatchMaxDuration: op.Options.BatchMaxDuration,
		PodMetrics:       !op.Options.DisableClusterStateObservability,
	})
	if err := state.Register(ctx, op.Manager, cluster); err != nil {
		return nil, fmt.Errorf("registering cluster state: %w", err)
	}
	return cluster, nil
}
