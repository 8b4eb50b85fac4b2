package disruption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// SnapshotSimulator simulates through the snapshot builder provisioning
// uses, so a decision sees the cluster exactly as a provisioning round
// would: pending pods, pods leaving other disrupted or deleting nodes, and
// the candidates' pods.
type SnapshotSimulator struct {
	Builder *snapshot.Builder
}

// Simulate implements Simulator. Excluded destinations get a taint that
// only the moved pods do not tolerate, so consolidation does not pile pods
// onto nodes that just had churn (upstream's rule for destinations inside
// their own consolidateAfter window); Types restricts the pools.
func (s SnapshotSimulator) Simulate(ctx context.Context, req SimulationRequest) (*Simulated, error) {
	snap, err := s.Builder.Build(ctx, snapshot.Request{Remove: req.Remove})
	if err != nil {
		return nil, fmt.Errorf("building the simulation snapshot: %w", err)
	}
	in := *snap.Input
	if req.Types != nil {
		in.NodePools = snapshot.RestrictPools(in.NodePools, req.Types)
	}
	if len(req.Exclude) > 0 {
		excludeDestinations(&in, snap.Moved, req.Exclude)
	}
	return &Simulated{Input: &in, Result: scheduling.Solve(&in), NodePools: snap.NodePools, Moved: snap.Moved}, nil
}

func excludeDestinations(in *scheduling.Input, moved []*corev1.Pod, exclude map[string]bool) {
	taint := disruption.ExcludedDestinationTaint()
	nodes := make([]*scheduling.ExistingNode, len(in.Nodes))
	for i, n := range in.Nodes {
		if !exclude[n.Name] && (n.NodeClaim == "" || !exclude[n.NodeClaim]) {
			nodes[i] = n
			continue
		}
		cp := *n
		cp.Taints = append(append([]corev1.Taint(nil), n.Taints...), taint)
		nodes[i] = &cp
	}
	in.Nodes = nodes
	isMoved := map[types.UID]bool{}
	for _, p := range moved {
		isMoved[p.UID] = true
	}
	pods := make([]*corev1.Pod, len(in.Pods))
	for i, p := range in.Pods {
		if isMoved[p.UID] {
			pods[i] = p
			continue
		}
		cp := *p
		cp.Spec.Tolerations = append(append([]corev1.Toleration(nil), p.Spec.Tolerations...),
			corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: taint.Effect})
		pods[i] = &cp
	}
	in.Pods = pods
}
