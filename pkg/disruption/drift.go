package disruption

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Drift replaces drifted nodes of dynamic pools (reason Drifted): the
// longest-drifted first; every empty one the budgets allow goes in one
// command (they need no simulation, as upstream batches them); otherwise
// one node per command, with the replacements its pods need, skipped when
// some of its pods would fit nowhere.
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
	var verdicts []Verdict
	var empty []*Candidate
	for _, c := range cs {
		if !c.Empty() {
			continue
		}
		if remaining(budgets, c.NodePool.Name) <= 0 {
			continue // reported below
		}
		budgets[c.NodePool.Name].Remaining--
		empty = append(empty, c)
	}
	if len(empty) > 0 {
		picked := map[*Candidate]bool{}
		for _, c := range empty {
			picked[c] = true
		}
		for _, c := range cs {
			if !picked[c] {
				verdicts = append(verdicts, d.deferred(c, budgets))
			}
		}
		return []*Command{{Method: d, Candidates: empty}}, verdicts, nil
	}
	for i, c := range cs {
		if remaining(budgets, c.NodePool.Name) <= 0 {
			verdicts = append(verdicts, budgetVerdict(c, d.Reason(), budgets[c.NodePool.Name]))
			continue
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
		return []*Command{{Method: d, Candidates: []*Candidate{c}, Replacements: sim.Replacements, Simulation: sim}}, verdicts, nil
	}
	return nil, verdicts, nil
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
