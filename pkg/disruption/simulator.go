package disruption

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// SolverSimulator is the simulator: it builds the solver's input with
// snapshot.Build over View, with the candidates removed, and solves it with
// the solver provisioning uses, so that a decision sees the cluster exactly
// as a provisioning round would (pending pods, pods leaving other disrupted
// or deleting nodes, the candidates' pods). The controller's View is its
// cluster state, the CLI's the objects it listed; offline planning passes
// a Snapshot.
type SolverSimulator struct {
	// Context is passed to the view (context.Background when nil).
	Context context.Context
	View    snapshot.View
	// Request carries the caller's snapshot.Options (solver options,
	// well-known labels, the insufficient-capacity cache, ignored taints);
	// each simulation sets what to remove, exclude and restrict.
	Request snapshot.Request
}

// Simulate implements Simulator.
func (s SolverSimulator) Simulate(cs []*Candidate, opts SimulationOptions) (*Simulation, error) {
	ctx := s.Context
	if ctx == nil {
		ctx = context.Background()
	}
	req := s.Request
	req.Remove = make(map[string]bool, len(cs))
	for _, c := range cs {
		req.Remove[c.Name()] = true
	}
	req.Exclude, req.Types = opts.Exclude, opts.Types
	snap, err := snapshot.Build(ctx, s.View, req)
	if err != nil {
		return nil, fmt.Errorf("building the simulation snapshot: %w", err)
	}
	return interpret(snap.Input, scheduling.Solve(snap.Input), snap.Moved, opts.Exclude), nil
}

// interpret turns a solve into a Simulation: a moved pod that found no
// home, or only a Karpenter node still starting (it might never come up) or
// an excluded destination, is unschedulable; only the new NodeClaims that
// take a moved pod are replacements (pending pods are provisioning's
// business).
func interpret(in *scheduling.Input, res *scheduling.Result, moved []*corev1.Pod, excluded map[string]bool) *Simulation {
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
