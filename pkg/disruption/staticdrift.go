package disruption

import (
	"fmt"
	"sort"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// StaticDrift replaces drifted NodeClaims of static pools (spec.replicas
// set), one command per node, as many as the pool's Drifted budget and the
// headroom under limits.nodes allow. Each command launches a NodeClaim
// from the pool's template and then deletes the old one; no simulation is
// needed since a static pool's nodes are interchangeable.
type StaticDrift struct{}

func (StaticDrift) Reason() v1.DisruptionReason { return v1.DisruptionReasonDrifted }
func (StaticDrift) Class() Class                { return Eventual }
func (StaticDrift) ConsolidationType() string   { return "" }

// ShouldDisrupt implements Method.
func (s StaticDrift) ShouldDisrupt(_ *Snapshot, c *Candidate) (bool, *Verdict) {
	if !c.NodePool.IsStatic() {
		return false, nil // Drift's
	}
	if !conditionTrue(c.NodeClaim, v1.ConditionTypeDrifted) {
		v := c.verdict(KindNotDrifted, s.Reason())
		return false, &v
	}
	return true, nil
}

// ComputeCommands implements Method.
func (s StaticDrift) ComputeCommands(env *Env, budgets map[string]*BudgetStatus, cs []*Candidate) ([]*Command, []Verdict, error) {
	byPool := map[string][]*Candidate{}
	for _, c := range cs {
		byPool[c.NodePool.Name] = append(byPool[c.NodePool.Name], c)
	}
	pools := make([]string, 0, len(byPool))
	for name := range byPool {
		pools = append(pools, name)
	}
	sort.Strings(pools)
	var cmds []*Command
	var verdicts []Verdict
	for _, name := range pools {
		group := byPool[name]
		sortByDrift(group)
		np := group[0].NodePool
		headroom := nodeHeadroom(env.Snapshot, np)
		for _, c := range group {
			if remaining(budgets, name) <= 0 {
				verdicts = append(verdicts, budgetVerdict(c, s.Reason(), budgets[name]))
				continue
			}
			if headroom <= 0 {
				verdicts = append(verdicts, c.verdict(KindNodeLimit, s.Reason()))
				continue
			}
			replacement, err := StaticReplacement(np)
			if err != nil {
				return nil, verdicts, err
			}
			budgets[name].Remaining--
			headroom--
			cmds = append(cmds, &Command{Method: s, Candidates: []*Candidate{c}, Replacements: []*scheduling.NewNodeClaim{replacement}})
		}
	}
	return cmds, verdicts, nil
}

// nodeHeadroom is how many more NodeClaims limits.nodes lets the pool have
// (Unlimited without that limit). Every NodeClaim of the pool that is not
// being deleted counts, launched or not.
func nodeHeadroom(snap *Snapshot, np *v1.NodePool) int {
	limit, ok := np.Spec.Limits[v1.ResourceNodes]
	if !ok {
		return Unlimited
	}
	used := 0
	for _, n := range snap.Nodes {
		if n.NodeClaim != nil && n.NodePool == np.Name && !n.Deleting {
			used++
		}
	}
	return int(limit.Value()) - used
}

// StaticReplacement is the NodeClaim plan that stands in for a node of a
// static pool: the pool's template requirements, no pods, no requests (the
// provider picks the instance type at launch). Provisioning's NodeClaim
// builder turns it into the API object.
func StaticReplacement(np *v1.NodePool) (*scheduling.NewNodeClaim, error) {
	in := make([]scheduling.RequirementWithMinValues, 0, len(np.Spec.Template.Spec.Requirements))
	for _, r := range np.Spec.Template.Spec.Requirements {
		in = append(in, scheduling.RequirementWithMinValues{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: r.MinValues})
	}
	reqs, err := scheduling.RequirementsFromMinValues(in)
	if err != nil {
		return nil, fmt.Errorf("nodepool %s requirements: %w", np.Name, err)
	}
	return &scheduling.NewNodeClaim{NodePool: np.Name, Requirements: reqs, Labels: np.Spec.Template.LabelMap(),
		Taints: np.Spec.Template.Spec.Taints, StartupTaints: np.Spec.Template.Spec.StartupTaints}, nil
}
