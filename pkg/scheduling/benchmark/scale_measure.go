package benchmark

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

// ScaleMetrics extends Metrics for snapshots with existing nodes.
type ScaleMetrics struct {
	// Metrics.Bound here is the LP bound on new capacity for the placed
	// pods' demand less the free capacity of all existing nodes (per
	// resource, floored at 0). Any plan must buy at least that much, since
	// existing nodes can absorb at most their free capacity of each resource.
	// It ignores constraints (pools, arch, spread, anti-affinity, limits), so
	// on a constrained workload the ratio also prices the constraints.
	Metrics
	OnExisting, OnNew int
	// PackingBound is the LP bound for just the pods placed on new
	// NodeClaims; Cost/PackingBound isolates how well those were packed from
	// how well existing capacity was used.
	PackingBound, PackingRatio float64
}

// MeasureScale computes ScaleMetrics for a solve of in. cat must be the
// neutral form of the instance types in in.
func MeasureScale(res *scheduling.Result, in *scheduling.Input, cat []workload.InstanceType) (ScaleMetrics, error) {
	m := ScaleMetrics{Metrics: Metrics{Pods: len(in.Pods), NodeClaims: len(res.NewNodeClaims)}}
	var placed, onNew []*corev1.Pod
	for _, p := range res.Placements {
		switch {
		case p.Node != "":
			m.OnExisting++
			placed = append(placed, p.Pod)
		case p.NodeClaim >= 0:
			m.OnNew++
			placed = append(placed, p.Pod)
			onNew = append(onNew, p.Pod)
		default:
			m.Unscheduled++
		}
	}
	for i, nc := range res.NewNodeClaims {
		price, ok := cheapestLaunch(nc)
		if !ok {
			return m, fmt.Errorf("nodeclaim %d (%s) has no launchable offering", i, nc.Hostname)
		}
		m.Cost += price
	}
	demand := workload.TotalDemand(placed)
	for name, free := range FreeCapacity(in.Nodes) {
		if v, ok := demand[name]; ok {
			demand[name] = max(0, v-free)
		}
	}
	var err error
	if m.Bound, err = lpBound(demand, cat); err != nil {
		return m, err
	}
	if m.PackingBound, err = lpBound(workload.TotalDemand(onNew), cat); err != nil {
		return m, err
	}
	if m.Bound > 0 {
		m.Ratio = m.Cost / m.Bound
	}
	if m.PackingBound > 0 {
		m.PackingRatio = m.Cost / m.PackingBound
	}
	return m, nil
}

func lpBound(d workload.Demand, cat []workload.InstanceType) (float64, error) {
	positive := false
	for _, v := range d {
		positive = positive || v > 0
	}
	if !positive {
		return 0, nil
	}
	b, err := workload.LowerBound(d, cat)
	if err != nil {
		return 0, fmt.Errorf("lower bound: %w", err)
	}
	return b.LP, nil
}

// FreeCapacity is, per resource, the sum over nodes of allocatable minus
// the requests of the pods already bound there (never below 0 per node).
func FreeCapacity(nodes []*scheduling.ExistingNode) workload.Demand {
	free := workload.Demand{}
	for _, n := range nodes {
		used := sumRequests(nil, n.Pods...)
		for name, q := range n.Allocatable {
			free[name] += max(0, q.AsApproximateFloat64()-used[name])
		}
	}
	return free
}
