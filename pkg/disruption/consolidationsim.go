package disruption

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// SolverSimulator answers simulations from the Snapshot alone, with the
// same pure solver provisioning uses: the snapshot's nodes are the
// existing capacity, its dynamic NodePools (with Snapshot.InstanceTypes)
// what may be launched. It is what a CLI or an offline benchmark uses in
// place of the controller's simulator; it sees no pending pods and no
// DaemonSets beyond the pods already on nodes, unless Extra adds them.
type SolverSimulator struct {
	Snapshot *Snapshot
	// Options are the solver's.
	Options scheduling.Options
	// Extra is added to every Input as is (pending pods, DaemonSets).
	Extra func(in *scheduling.Input)
}

// excludedTaint keeps moved pods off the nodes a consolidation may not
// use as destinations; pods already planned (pending ones) tolerate it.
var excludedTaint = corev1.Taint{Key: "karpenter-go.io/consolidate-after-window", Effect: corev1.TaintEffectNoSchedule}

// ExcludedDestinationTaint is the taint simulators put on excluded
// destinations; only the moved pods do not tolerate it.
func ExcludedDestinationTaint() corev1.Taint { return excludedTaint }

// Simulate implements Simulator.
func (s SolverSimulator) Simulate(cs []*Candidate, opts SimulationOptions) (*Simulation, error) {
	snap := s.Snapshot
	excluded := opts.Exclude
	remove := map[string]bool{}
	var moved []*corev1.Pod
	for _, c := range cs {
		remove[c.Name()] = true
		for _, p := range c.Reschedulable {
			cp := p.DeepCopy()
			cp.Spec.NodeName = ""
			moved = append(moved, cp)
		}
	}
	in := &scheduling.Input{Pods: moved, Options: s.Options}
	for _, n := range snap.Nodes {
		if remove[n.Name()] || n.Deleting || n.MarkedForDeletion || n.Node == nil {
			continue
		}
		en := &scheduling.ExistingNode{
			Name: n.Name(), NodeClaim: n.NodeClaimName(), Labels: n.Node.Labels,
			Taints: n.Node.Spec.Taints, Allocatable: n.Node.Status.Allocatable,
			Pods: n.Pods, Initialized: n.Initialized || n.NodeClaim == nil, Managed: n.NodeClaim != nil,
		}
		if excluded[en.Name] {
			en.Taints = append(append([]corev1.Taint(nil), en.Taints...), excludedTaint)
		}
		in.Nodes = append(in.Nodes, en)
	}
	pools, err := SolverNodePools(snap)
	if err != nil {
		return nil, err
	}
	in.NodePools = pools
	if opts.Types != nil {
		in.NodePools = snapshot.RestrictPools(in.NodePools, opts.Types)
	}
	if s.Extra != nil {
		s.Extra(in)
	}
	if len(excluded) > 0 {
		tolerateExcluded(in, moved)
	}
	res := scheduling.Solve(in)
	return InterpretSimulation(in, res, moved, excluded), nil
}

// tolerateExcluded lets every pod but the moved ones onto excluded
// destinations.
func tolerateExcluded(in *scheduling.Input, moved []*corev1.Pod) {
	isMoved := map[*corev1.Pod]bool{}
	for _, p := range moved {
		isMoved[p] = true
	}
	pods := make([]*corev1.Pod, len(in.Pods))
	for i, p := range in.Pods {
		if isMoved[p] {
			pods[i] = p
			continue
		}
		cp := *p
		cp.Spec.Tolerations = append(append([]corev1.Toleration(nil), p.Spec.Tolerations...),
			corev1.Toleration{Key: excludedTaint.Key, Operator: corev1.TolerationOpExists, Effect: excludedTaint.Effect})
		pods[i] = &cp
	}
	in.Pods = pods
}

// InterpretSimulation turns a solve into a Simulation: a moved pod that
// found no home, or only a Karpenter node still starting (it might never
// come up) or an excluded destination, is unschedulable; only the new
// NodeClaims that take a moved pod are replacements.
func InterpretSimulation(in *scheduling.Input, res *scheduling.Result, moved []*corev1.Pod, excluded map[string]bool) *Simulation {
	out := &Simulation{Result: res}
	isMoved := map[string]bool{}
	for _, p := range moved {
		isMoved[string(p.UID)+"|"+podKey(p)] = true
	}
	starting := map[string]bool{}
	for _, n := range in.Nodes {
		if n.Managed && !n.Initialized {
			starting[n.Name] = true
		}
	}
	needed := map[int]bool{}
	for _, pl := range res.Placements {
		if !isMoved[string(pl.Pod.UID)+"|"+podKey(pl.Pod)] {
			continue
		}
		switch {
		case pl.Node != "" && (starting[pl.Node] || excluded[pl.Node]):
			out.Unschedulable = append(out.Unschedulable, podKey(pl.Pod))
		case pl.Node != "":
		case pl.NodeClaim >= 0:
			needed[pl.NodeClaim] = true
		default:
			out.Unschedulable = append(out.Unschedulable, podKey(pl.Pod))
		}
	}
	for i, nc := range res.NewNodeClaims {
		if needed[i] {
			out.Replacements = append(out.Replacements, nc)
		}
	}
	sort.Strings(out.Unschedulable)
	return out
}

// SolverNodePools converts the snapshot's dynamic, non-deleting pools for
// the solver, heaviest first, with limit headroom over the nodes they have.
// Both the solver simulator and the repacking planner launch from these.
func SolverNodePools(snap *Snapshot) ([]*scheduling.NodePool, error) {
	names := sortedPools(snap)
	var out []*scheduling.NodePool
	for _, name := range names {
		np := snap.NodePools[name]
		if np.IsStatic() || !np.DeletionTimestamp.IsZero() || len(snap.InstanceTypes[name]) == 0 {
			continue
		}
		in := make([]scheduling.RequirementWithMinValues, 0, len(np.Spec.Template.Spec.Requirements))
		for _, r := range np.Spec.Template.Spec.Requirements {
			in = append(in, scheduling.RequirementWithMinValues{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: r.MinValues})
		}
		reqs, err := scheduling.RequirementsFromMinValues(in)
		if err != nil {
			return nil, fmt.Errorf("nodepool %s requirements: %w", name, err)
		}
		labels := map[string]string{}
		for k, v := range np.Spec.Template.LabelMap() {
			labels[k] = v
		}
		labels[v1.NodePoolLabelKey] = name
		var weight int32
		if np.Spec.Weight != nil {
			weight = *np.Spec.Weight
		}
		out = append(out, &scheduling.NodePool{
			Name: name, Weight: weight, Requirements: reqs, Labels: labels,
			Taints: np.Spec.Template.Spec.Taints, StartupTaints: np.Spec.Template.Spec.StartupTaints,
			Remaining: remainingLimits(snap, np), Limits: corev1.ResourceList(np.Spec.Limits),
			InstanceTypes: snap.InstanceTypes[name],
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out, nil
}

// remainingLimits is the pool's limits minus the capacity of its nodes
// (the removed ones still count: they are there until they are gone).
func remainingLimits(snap *Snapshot, np *v1.NodePool) corev1.ResourceList {
	if np.Spec.Limits == nil {
		return nil
	}
	used := corev1.ResourceList{}
	count := int64(0)
	for _, n := range snap.Nodes {
		if n.NodePool != np.Name || n.NodeClaim == nil || n.Node == nil {
			continue
		}
		count++
		for name, q := range n.Node.Status.Capacity {
			cur := used[name]
			cur.Add(q)
			used[name] = cur
		}
	}
	used[v1.ResourceNodes] = *resource.NewQuantity(count, resource.DecimalSI)
	out := corev1.ResourceList{}
	for name, limit := range np.Spec.Limits {
		left := limit.DeepCopy()
		if u, ok := used[name]; ok {
			left.Sub(u)
		}
		if left.Sign() < 0 {
			left = *resource.NewQuantity(0, left.Format)
		}
		out[name] = left
	}
	return out
}
