package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/strategies"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
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
	// IfUnblocked is what the pass would do with the node if its blockers
	// (do-not-disrupt, PDBs, its pool's budget) were lifted: the saving
	// they cost, or why it would be kept even then. Nil when nothing a
	// user can lift blocks it.
	IfUnblocked *Unblocked `json:"ifUnblocked,omitempty"`
	Message     string     `json:"message"`
}

// Unblocked is the disruption a node's blockers prevent.
type Unblocked struct {
	// Method is the disruption reason that would act (Underutilized,
	// Empty, Drifted).
	Method   string `json:"method"`
	Decision string `json:"decision"`
	// Candidates are the nodes the command would disrupt together (the
	// node, and others a multi-node move takes with it).
	Candidates []string `json:"candidates"`
	// SavingPerHour is the candidates' price less their replacements'.
	SavingPerHour float64 `json:"savingPerHour"`
	// Replacements are the instance types the replacements would launch
	// as (the cheapest of each one's options).
	Replacements []string `json:"replacements,omitempty"`
	// Blockers are the verdict kinds lifted for the simulation.
	Blockers []string `json:"blockers"`
	// StillKept are the verdicts that would keep the node even unblocked
	// (then Method is empty and nothing would be saved).
	StillKept []string `json:"stillKept,omitempty"`
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
		ans.IfUnblocked = s.ifUnblocked(snap, ans.Node, e.Verdicts)
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
	sim := disruption.SolverSimulator{View: snapshot.Memo(s.view), Request: s.request}
	snap.Pending = s.pendingPods()
	p := s.opts.Planner
	strategy, err := strategies.New(strategies.Options{Algorithm: s.opts.ConsolidationAlgorithm, WellKnownLabels: kwok.WellKnownLabels(),
		Horizon: p.Horizon, RestartCost: p.RestartCost, CoolDown: p.CoolDown})
	if err != nil {
		return nil, err
	}
	return disruption.Disrupt(snap, disruption.MethodsOf(strategy), sim)
}

// blockers are the verdict kinds a user can lift: annotations, PDBs and
// budgets, as opposed to facts about the node (not initialized, deleting).
var blockers = map[disruption.Kind]bool{
	disruption.KindNodeDoNotDisrupt: true, disruption.KindPodDoNotDisrupt: true, disruption.KindInvalidAnnotation: true,
	disruption.KindPDBBlocked: true, disruption.KindMultiplePDBs: true, disruption.KindBudgetExhausted: true,
}

// ifUnblocked runs the pass again on a copy of snap in which the node's
// blockers are lifted, and reports the command that would then include it.
func (s *Session) ifUnblocked(snap *disruption.Snapshot, name string, verdicts []disruption.Verdict) *Unblocked {
	var kinds []string
	for _, v := range verdicts {
		if blockers[v.Kind] {
			kinds = append(kinds, string(v.Kind))
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	free := unblock(snap, name)
	d, _ := s.disruptionPass(free)
	if d == nil {
		return nil
	}
	for _, cmd := range d.Commands {
		for _, c := range cmd.Candidates {
			if c.Name() != name {
				continue
			}
			saving, err := disruption.CommandSaving(free, cmd)
			if err != nil {
				return nil
			}
			u := &Unblocked{Method: string(cmd.Method.Reason()), Decision: cmd.Decision(), SavingPerHour: saving, Blockers: kinds}
			for _, c := range cmd.Candidates {
				u.Candidates = append(u.Candidates, c.Name())
			}
			for _, r := range cmd.Replacements {
				if len(r.InstanceTypes) > 0 {
					u.Replacements = append(u.Replacements, r.InstanceTypes[0].Name)
				}
			}
			return u
		}
	}
	u := &Unblocked{Blockers: kinds}
	for _, e := range d.Explanations {
		if e.Node == name {
			for _, v := range e.Verdicts {
				u.StillKept = append(u.StillKept, v.Message())
			}
		}
	}
	return u
}

// unblock is snap with the named node's blockers lifted: the do-not-disrupt
// annotation gone from the node, its NodeClaim and its pods, the PDBs that
// select any of its pods dropped, and its pool's budget at 100%. Everything
// else is shared with snap, which stays untouched.
func unblock(snap *disruption.Snapshot, name string) *disruption.Snapshot {
	out := *snap
	out.Nodes = make([]*disruption.Node, len(snap.Nodes))
	var pods []*corev1.Pod
	pool := ""
	for i, n := range snap.Nodes {
		if n.Name() != name {
			out.Nodes[i] = n
			continue
		}
		u := *n
		if n.Node != nil {
			u.Node = n.Node.DeepCopy()
			delete(u.Node.Annotations, v1.DoNotDisruptAnnotationKey)
		}
		if n.NodeClaim != nil {
			u.NodeClaim = n.NodeClaim.DeepCopy()
			delete(u.NodeClaim.Annotations, v1.DoNotDisruptAnnotationKey)
		}
		u.Pods = make([]*corev1.Pod, len(n.Pods))
		for j, p := range n.Pods {
			c := p.DeepCopy()
			delete(c.Annotations, v1.DoNotDisruptAnnotationKey)
			u.Pods[j] = c
		}
		pods, pool = u.Pods, n.NodePool
		out.Nodes[i] = &u
	}
	out.PDBs = nil
	for _, pdb := range snap.PDBs {
		if !selectsAny(pdb, pods) {
			out.PDBs = append(out.PDBs, pdb)
		}
	}
	if np, ok := snap.NodePools[pool]; ok {
		out.NodePools = make(map[string]*v1.NodePool, len(snap.NodePools))
		for k, v := range snap.NodePools {
			out.NodePools[k] = v
		}
		free := np.DeepCopy()
		free.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
		out.NodePools[pool] = free
	}
	return &out
}

func selectsAny(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return false
	}
	for _, p := range pods {
		if p.Namespace == pdb.Namespace && sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}
