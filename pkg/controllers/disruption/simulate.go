package disruption

import (
	"context"
	"fmt"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// SnapshotSimulator simulates through the snapshot builder provisioning
// uses, so a drift decision sees the cluster exactly as a provisioning
// round would: pending pods, pods leaving other disrupted or deleting
// nodes, and the candidates' pods.
type SnapshotSimulator struct {
	Builder *snapshot.Builder
}

// Simulate implements Simulator.
func (s SnapshotSimulator) Simulate(ctx context.Context, remove map[string]bool) (*Simulated, error) {
	snap, err := s.Builder.Build(ctx, snapshot.Request{Remove: remove})
	if err != nil {
		return nil, fmt.Errorf("building the simulation snapshot: %w", err)
	}
	return &Simulated{Input: snap.Input, Result: scheduling.Solve(snap.Input), NodePools: snap.NodePools, Moved: snap.Moved}, nil
}
