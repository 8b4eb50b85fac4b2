// Package benchmark runs upstream Karpenter's scheduling benchmark workload
// (package workload) through our solver and measures it: throughput,
// NodeClaims created, cheapest-launch cost and how far that cost is from a
// lower bound. The adapters here are what the benchmark shares with any
// other harness that wants to feed the workload to scheduling.Solve.
//
// It also owns the scale workload (GenerateScale: our own busy cluster of
// 20,000 pending pods, 1,000 nodes and a 700-type catalogue), MeasureScale
// for plans over existing nodes, and CheckPlan, an independent check of the
// hard guarantees a plan must keep.
package benchmark

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

// NodePoolName is the name of the benchmark's single NodePool.
const NodePoolName = "default"

// InstanceTypes converts the neutral catalogue to the solver's types.
func InstanceTypes(cat []workload.InstanceType) ([]*scheduling.InstanceType, error) {
	out := make([]*scheduling.InstanceType, 0, len(cat))
	for _, it := range cat {
		reqs, err := scheduling.RequirementsFromNodeSelector(it.Requirements)
		if err != nil {
			return nil, fmt.Errorf("instance type %s: %w", it.Name, err)
		}
		offs := make([]scheduling.Offering, 0, len(it.Offerings))
		for _, o := range it.Offerings {
			offs = append(offs, scheduling.Offering{
				Zone:         o.Zone,
				CapacityType: o.CapacityType,
				Price:        o.Price,
				Available:    o.Available,
			})
		}
		out = append(out, &scheduling.InstanceType{
			Name:         it.Name,
			Requirements: reqs,
			Offerings:    offs,
			Capacity:     it.Capacity.DeepCopy(),
			Overhead:     it.Overhead.DeepCopy(),
		})
	}
	return out, nil
}

// NodePool is the benchmark's only pool: no requirements, taints or weight,
// and limits (cpu 10,000,000, memory 10,000,000Gi) that never bind. The
// cluster is empty, so the remaining headroom is the whole limit.
func NodePool(types []*scheduling.InstanceType) *scheduling.NodePool {
	return &scheduling.NodePool{
		Name:         NodePoolName,
		Requirements: scheduling.Requirements{},
		Remaining: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10000000"),
			corev1.ResourceMemory: resource.MustParse("10000000Gi"),
		},
		InstanceTypes: types,
	}
}

// Input is the snapshot for one case: its pods, the pool, an empty cluster.
func Input(c workload.Case, pool *scheduling.NodePool) *scheduling.Input {
	in := &scheduling.Input{
		Pods:      c.Pods,
		NodePools: []*scheduling.NodePool{pool},
		// Upstream's fake provider declares its catalogue labels well known,
		// so pods may select on them without the NodePool mentioning them.
		WellKnownLabels: []string{workload.IntegerLabel, workload.SizeLabel, workload.SpecialLabel},
		Options: scheduling.Options{
			PreferencePolicy: scheduling.PreferencesRespect,
			MinValuesPolicy:  scheduling.MinValuesStrict,
		},
	}
	if c.IgnorePreferences {
		in.Options.PreferencePolicy = scheduling.PreferencesIgnore
	}
	return in
}

// Metrics describe one solve's plan.
type Metrics struct {
	Pods        int
	Unscheduled int
	NodeClaims  int
	// Cost is the cheapest-launch cost: for every new NodeClaim, the price of
	// the cheapest offering still allowed by its instance types, zone and
	// capacity type, summed.
	Cost float64
	// Bound is the LP lower bound on the cost of capacity for the placed
	// pods' total demand; Ratio is Cost/Bound.
	Bound float64
	Ratio float64
}

// Measure computes Metrics for a solve of pods against the catalogue.
func Measure(res *scheduling.Result, pods []*corev1.Pod, cat []workload.InstanceType) (Metrics, error) {
	m := Metrics{Pods: len(pods), NodeClaims: len(res.NewNodeClaims)}
	placed := make([]*corev1.Pod, 0, len(pods))
	for _, p := range res.Placements {
		if p.Scheduled() {
			placed = append(placed, p.Pod)
		} else {
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
	if len(placed) == 0 {
		return m, nil
	}
	b, err := workload.LowerBound(workload.TotalDemand(placed), cat)
	if err != nil {
		return m, fmt.Errorf("lower bound: %w", err)
	}
	m.Bound = b.LP
	if b.LP > 0 {
		m.Ratio = m.Cost / b.LP
	}
	return m, nil
}

// cheapestLaunch is what launching this NodeClaim would cost at best: the
// cheapest available offering of any listed type whose zone and capacity
// type the NodeClaim still allows.
func cheapestLaunch(nc *scheduling.NewNodeClaim) (float64, bool) {
	zones := nc.Requirements.Get(scheduling.LabelZone)
	cts := nc.Requirements.Get(scheduling.LabelCapacityType)
	best := math.Inf(1)
	for _, it := range nc.InstanceTypes {
		for _, o := range it.Offerings {
			if o.Available && o.Price < best && zones.Has(o.Zone) && cts.Has(o.CapacityType) {
				best = o.Price
			}
		}
	}
	return best, !math.IsInf(best, 1)
}
