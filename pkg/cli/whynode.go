package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// NodeAnswer is `why node`.
type NodeAnswer struct {
	Node      string `json:"node"`
	NodeClaim string `json:"nodeClaim,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	// Pods are the node's pods (namespace/name), DaemonSet pods included.
	Pods []string `json:"pods,omitempty"`
	// LaunchedFor are the pods the provisioner planned the NodeClaim for,
	// from their Nominated events (which the API server keeps an hour).
	LaunchedFor []string `json:"launchedFor,omitempty"`
	// Disrupting names the method that would disrupt the node in this pass
	// ("" when it is kept).
	Disrupting string `json:"disrupting,omitempty"`
	// Verdicts are the disruption pass's reasons for keeping the node.
	Verdicts []NodeVerdict `json:"verdicts,omitempty"`
	Message  string        `json:"message"`
}

// NodeVerdict is one disruption verdict.
type NodeVerdict struct {
	Kind    string `json:"kind"`
	Method  string `json:"method,omitempty"`
	Pod     string `json:"pod,omitempty"`
	PDB     string `json:"pdb,omitempty"`
	Message string `json:"message"`
	// Payback is what the move the planner's payback gate refused would
	// save and cost (planner only).
	Payback *PaybackFigures `json:"payback,omitempty"`
}

// PaybackFigures are a refused move's forecast: the node's price and its
// replacements', the saving over the horizon and the disruption cost of
// the evicted pods, both in dollars.
type PaybackFigures struct {
	PricePerHour            float64 `json:"pricePerHour"`
	ReplacementPricePerHour float64 `json:"replacementPricePerHour"`
	Horizon                 string  `json:"horizon"`
	Saving                  float64 `json:"saving"`
	DisruptionCost          float64 `json:"disruptionCost"`
	Evictions               int     `json:"evictions"`
}

// WhyNode runs one disruption pass over the listed cluster, with the
// default methods and a solver-backed simulator that also plans the pending
// pods, and reports what it decided for the node.
func (s *Session) WhyNode(ctx context.Context, name string) (*NodeAnswer, error) {
	snap := s.disruptionSnapshot(ctx)
	var node *disruption.Node
	for _, n := range snap.Nodes {
		if n.Name() == name || n.NodeClaimName() == name {
			node = n
			break
		}
	}
	if node == nil {
		return nil, fmt.Errorf("node %s not found", name)
	}
	ans := &NodeAnswer{Node: node.Name(), NodeClaim: node.NodeClaimName(), NodePool: node.NodePool,
		LaunchedFor: s.Objects.launchedFor(node.NodeClaimName())}
	for _, p := range node.Pods {
		ans.Pods = append(ans.Pods, p.Namespace+"/"+p.Name)
	}
	d, err := s.disruptionPass(snap)
	if d == nil {
		return nil, fmt.Errorf("running the disruption pass: %w", err)
	}
	for _, cmd := range d.Commands {
		for _, c := range cmd.Candidates {
			if c.Name() == ans.Node {
				ans.Disrupting = string(cmd.Method.Reason())
				ans.Message = fmt.Sprintf("would be disrupted now: %s (%s)", cmd.Method.Reason(), cmd.Decision())
				return ans, nil
			}
		}
	}
	for _, e := range d.Explanations {
		if e.Node != ans.Node {
			continue
		}
		for _, v := range e.Verdicts {
			nv := NodeVerdict{Kind: string(v.Kind), Method: string(v.Method), Pod: v.Pod, PDB: v.PDB, Message: v.Message()}
			if c := v.Consolidation; c != nil && c.Payback != nil {
				pb := c.Payback
				nv.Payback = &PaybackFigures{PricePerHour: pb.PriceBefore, ReplacementPricePerHour: pb.PriceAfter,
					Horizon: pb.Horizon.String(), Saving: pb.Saving, DisruptionCost: pb.Cost, Evictions: pb.Evictions}
			}
			ans.Verdicts = append(ans.Verdicts, nv)
		}
		ans.Message = e.Message()
		if ans.Message == "" {
			ans.Message = "no disruption method applies to the node now"
		}
		return ans, nil
	}
	ans.Message = "the disruption pass did not look at the node"
	if err != nil {
		ans.Message += ": " + err.Error()
	}
	return ans, nil
}

// disruptionPass runs one pass of the controller's methods over snap, with
// a solver-backed simulator that also plans the pending pods, as the
// disruption controller's does. The choice of consolidation is the
// controller's, without its history: the CLI cannot see which moves the
// controller made within its cool-down.
func (s *Session) disruptionPass(snap *disruption.Snapshot) (*disruption.Decision, error) {
	pending := s.pendingPods()
	daemonSets := s.cluster.DaemonSets()
	sim := disruption.SolverSimulator{Snapshot: snap, Extra: func(in *scheduling.Input) {
		in.Pods = append(append([]*corev1.Pod(nil), in.Pods...), pending...)
		in.DaemonSets = daemonSets
	}}
	methods := repack.Select(s.opts.ConsolidationAlgorithm, disruption.DefaultMethods(), repack.Options{WellKnownLabels: kwok.WellKnownLabels()})
	return disruption.Disrupt(snap, methods, sim)
}
