package disruption

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Drift replaces drifted nodes of dynamic pools (reason Drifted), one node
// per command as upstream: the empty ones first (the pods of a busy node
// would otherwise land on them and move again when they go), each group
// longest-drifted first; an empty node needs no simulation, a busy one
// comes with every NodeClaim its simulation creates, as upstream's, and is
// skipped when some of its pods would fit nowhere.
type Drift struct{}

func (Drift) Reason() v1.DisruptionReason { return v1.DisruptionReasonDrifted }
func (Drift) Class() Class                { return Eventual }
func (Drift) ConsolidationType() string   { return "" }

// ShouldDisrupt implements Method.
func (d Drift) ShouldDisrupt(_ *Snapshot, c *Candidate) (bool, *Verdict) {
	if c.NodePool.IsStatic() {
		return false, nil // StaticDrift's
	}
	if !conditionTrue(c.NodeClaim, v1.ConditionTypeDrifted) {
		v := c.verdict(KindNotDrifted, d.Reason())
		return false, &v
	}
	return true, nil
}

// ComputeCommands implements Method.
func (d Drift) ComputeCommands(env *Env, budgets map[string]*BudgetStatus, cs []*Candidate) ([]*Command, []Verdict, error) {
	sortByDrift(cs)
	// Empty first, each part in drift order.
	ordered := make([]*Candidate, 0, len(cs))
	for _, c := range cs {
		if c.Empty() {
			ordered = append(ordered, c)
		}
	}
	for _, c := range cs {
		if !c.Empty() {
			ordered = append(ordered, c)
		}
	}
	cs = ordered
	var verdicts []Verdict
	for i, c := range cs {
		if remaining(budgets, c.NodePool.Name) <= 0 {
			verdicts = append(verdicts, budgetVerdict(c, d.Reason(), budgets[c.NodePool.Name]))
			continue
		}
		if c.Empty() {
			for _, rest := range cs[i+1:] {
				verdicts = append(verdicts, d.deferred(rest, budgets))
			}
			return []*Command{{Method: d, Candidates: []*Candidate{c}}}, verdicts, nil
		}
		if env.Simulator == nil {
			v := c.verdict(KindSimulationFailed, d.Reason())
			v.Detail = "no scheduling simulator"
			verdicts = append(verdicts, v)
			continue
		}
		sim, err := env.Simulator.Simulate([]*Candidate{c}, SimulationOptions{})
		if err != nil {
			return nil, verdicts, fmt.Errorf("simulating drift of %s: %w", c.Name(), err)
		}
		if len(sim.Unschedulable) > 0 {
			v := c.verdict(KindReplacementWontFit, d.Reason())
			v.Pods, v.Event = sim.Unschedulable, true
			verdicts = append(verdicts, v)
			continue
		}
		for _, rest := range cs[i+1:] {
			verdicts = append(verdicts, d.deferred(rest, budgets))
		}
		return []*Command{{Method: d, Candidates: []*Candidate{c}, Replacements: driftReplacements(sim), Simulation: sim}}, verdicts, nil
	}
	return nil, verdicts, nil
}

// driftReplacements are all the NodeClaims the simulation creates: besides
// those the candidate's pods need, those for the pending pods and the pods
// of nodes already leaving, which would otherwise take the room the
// candidate's pods were counted on, or send them to another drifted node
// to be evicted again when its turn comes.
func driftReplacements(sim *Simulation) []*scheduling.NewNodeClaim {
	if sim.Result == nil {
		return sim.Replacements
	}
	return sim.Result.NewNodeClaims
}

// deferred explains a drifted candidate that another command went ahead of.
func (d Drift) deferred(c *Candidate, budgets map[string]*BudgetStatus) Verdict {
	if remaining(budgets, c.NodePool.Name) <= 0 {
		return budgetVerdict(c, d.Reason(), budgets[c.NodePool.Name])
	}
	return c.verdict(KindDeferred, d.Reason())
}

func podKeys(pods []*corev1.Pod, max int) []string {
	out := make([]string, 0, min(len(pods), max))
	for _, p := range pods[:min(len(pods), max)] {
		out = append(out, podKey(p))
	}
	return out
}
