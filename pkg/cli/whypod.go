package cli

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// PodAnswer is `why pod`.
type PodAnswer struct {
	Pod string `json:"pod"`
	// Phase: Running (bound to a node), Placeable (the solver finds room),
	// Unschedulable, or Ignored (Karpenter does not plan for it).
	Phase string `json:"phase"`
	// Node is where a bound pod runs, or the existing node a pending pod
	// fits on.
	Node         string `json:"node,omitempty"`
	NodePool     string `json:"nodePool,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	// NewNodeClaim describes the NodeClaim provisioning would launch for it.
	NewNodeClaim *NewNodeClaim `json:"newNodeClaim,omitempty"`
	// NodePools has one verdict per NodePool, in the solver's order, then
	// the pools planning leaves out; Existing is the existing nodes' verdict.
	NodePools []PoolVerdict `json:"nodePools,omitempty"`
	Existing  *PoolVerdict  `json:"existingNodes,omitempty"`
	Message   string        `json:"message,omitempty"`
}

// NewNodeClaim is a NodeClaim the solver would create.
type NewNodeClaim struct {
	NodePool      string   `json:"nodePool"`
	InstanceTypes []string `json:"instanceTypes"`
	Price         float64  `json:"price"`
	Pods          int      `json:"pods"`
}

// PoolVerdict is why one NodePool (or the existing nodes) refuses a pod.
type PoolVerdict struct {
	NodePool string `json:"nodePool,omitempty"`
	// Kind is the solver's refusal kind, or "Skipped" for a pool planning
	// leaves out entirely.
	Kind string `json:"kind"`
	Key  string `json:"key,omitempty"`
	// NodePoolValues and PodValues are both sides of a requirement conflict
	// (operator and values).
	NodePoolValues string              `json:"nodePoolValues,omitempty"`
	PodValues      string              `json:"podValues,omitempty"`
	Taint          string              `json:"taint,omitempty"`
	Resource       corev1.ResourceName `json:"resource,omitempty"`
	Limit          string              `json:"limit,omitempty"`
	Used           string              `json:"used,omitempty"`
	Remaining      string              `json:"remaining,omitempty"`
	Needed         string              `json:"needed,omitempty"`
	Message        string              `json:"message"`
}

// WhyPod explains where a pod runs, or would run, or why it cannot.
func (s *Session) WhyPod(ctx context.Context, nn types.NamespacedName) (*PodAnswer, error) {
	pod := s.Objects.podByName(nn)
	if pod == nil {
		return nil, fmt.Errorf("pod %s not found", nn)
	}
	ans := &PodAnswer{Pod: nn.String()}
	if pod.Spec.NodeName != "" {
		ans.Phase = "Running"
		ans.Node = pod.Spec.NodeName
		if sn, ok := s.cluster.Node(pod.Spec.NodeName); ok {
			ans.NodePool = sn.NodePoolName()
			ans.InstanceType = sn.Labels()[corev1.LabelInstanceTypeStable]
		}
		ans.Message = fmt.Sprintf("bound to node %s", ans.Node)
		if ans.NodePool != "" {
			ans.Message += fmt.Sprintf(" (nodepool %s, %s); `karpenter why node %s` says why it stays", ans.NodePool, ans.InstanceType, ans.Node)
		}
		return ans, nil
	}
	snap, err := snapshot.Build(ctx, s.view, s.provision)
	if err != nil {
		return nil, fmt.Errorf("building snapshot: %w", err)
	}
	for _, ig := range snap.Ignored {
		if ig.Pod.UID == pod.UID && ig.Pod.Name == pod.Name {
			ans.Phase = "Ignored"
			ans.Message = ig.Err.Error()
			if errors.Is(ig.Err, snapshot.ErrNotManaged) {
				ans.Message = snapshot.ErrNotManaged.Error()
			}
			return ans, nil
		}
	}
	in := snap.Input
	idx := -1
	for i, p := range in.Pods {
		if p.UID == pod.UID && p.Namespace == pod.Namespace && p.Name == pod.Name {
			idx = i
			break
		}
	}
	if idx < 0 {
		// Not provisionable as the controller sees it (gated, another
		// scheduler, terminating): say so, and still show what the
		// solver would answer.
		ans.Message = "karpenter does not plan for this pod now (scheduling gates, another scheduler, or terminating); verdicts are for the pod as if it were pending"
		cp := *in
		cp.Pods = append(append([]*corev1.Pod(nil), in.Pods...), pod)
		in, idx = &cp, len(in.Pods)
	}
	res := scheduling.Solve(in)
	pl := res.Placements[idx]
	switch {
	case pl.Node != "":
		ans.Phase = "Placeable"
		ans.Node = pl.Node
		if sn, ok := s.cluster.Node(pl.Node); ok {
			ans.NodePool = sn.NodePoolName()
			ans.InstanceType = sn.Labels()[corev1.LabelInstanceTypeStable]
		}
		msg := "fits existing node " + pl.Node
		if ans.NodePool != "" {
			msg += fmt.Sprintf(" (nodepool %s, %s)", ans.NodePool, ans.InstanceType)
		}
		ans.Message = joinMsg(ans.Message, msg)
	case pl.NodeClaim >= 0:
		nc := res.NewNodeClaims[pl.NodeClaim]
		ans.Phase = "Placeable"
		ans.NodePool = nc.NodePool
		ans.NewNodeClaim = &NewNodeClaim{NodePool: nc.NodePool, Price: nc.Price, Pods: len(nc.Pods)}
		for _, it := range nc.InstanceTypes {
			ans.NewNodeClaim.InstanceTypes = append(ans.NewNodeClaim.InstanceTypes, it.Name)
		}
		ans.Message = joinMsg(ans.Message, fmt.Sprintf("a new NodeClaim from nodepool %s (%d instance types, cheapest %s at $%.4f/h)",
			nc.NodePool, len(nc.InstanceTypes), firstName(nc.InstanceTypes), nc.Price))
	default:
		ans.Phase = "Unschedulable"
		for _, e := range pl.Errors {
			v := verdictOf(e)
			if e.NodePool == "" {
				ans.Existing = &v
				continue
			}
			ans.NodePools = append(ans.NodePools, v)
		}
		ans.Message = joinMsg(ans.Message, "no NodePool and no existing node can take the pod")
	}
	for i := range s.Objects.NodePools {
		np := &s.Objects.NodePools[i]
		if _, planned := snap.NodePools[np.Name]; planned {
			continue
		}
		reason := s.poolSkipReason(ctx, np)
		if reason == "" {
			reason = "left out of planning"
		}
		ans.NodePools = append(ans.NodePools, PoolVerdict{NodePool: np.Name, Kind: "Skipped", Message: reason})
	}
	return ans, nil
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func firstName(its []*scheduling.InstanceType) string {
	if len(its) == 0 {
		return ""
	}
	return its[0].Name
}

// verdictOf flattens a typed refusal for output.
func verdictOf(e scheduling.PlacementError) PoolVerdict {
	v := PoolVerdict{NodePool: e.NodePool, Kind: string(e.Kind), Key: e.Key, Resource: e.Resource, Message: e.Reason}
	if v.Message == "" {
		v.Message = e.Message()
	}
	if e.NodeRequirement != nil {
		v.NodePoolValues = requirementString(*e.NodeRequirement)
	}
	if e.PodRequirement != nil {
		v.PodValues = requirementString(*e.PodRequirement)
	}
	if e.Taint != nil {
		v.Taint = e.Taint.ToString()
	}
	if e.Limit != nil {
		v.Limit = e.Limit.String()
	}
	if e.Used != nil {
		v.Used = e.Used.String()
	}
	if e.Remaining != nil {
		v.Remaining = e.Remaining.String()
	}
	if e.Needed != nil {
		v.Needed = e.Needed.String()
	}
	return v
}

func requirementString(r scheduling.Requirement) string {
	return fmt.Sprintf("%s %v", r.Operator(), r.Values())
}
