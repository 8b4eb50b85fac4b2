package disruption

import (
	"time"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Emptiness removes, in one command, every empty candidate whose pool has
// consolidation enabled and whose NodeClaim is Consolidatable, as far as
// budgets allow (reason Empty).
type Emptiness struct{}

func (Emptiness) Reason() v1.DisruptionReason { return v1.DisruptionReasonEmpty }
func (Emptiness) Class() Class                { return Graceful }
func (Emptiness) ConsolidationType() string   { return "empty" }

// ShouldDisrupt implements Method.
func (e Emptiness) ShouldDisrupt(_ *Snapshot, c *Candidate) (bool, *Verdict) {
	if c.NodePool.IsStatic() {
		// Static pools keep their node count; they are never consolidated.
		return false, nil
	}
	after := c.NodePool.Spec.Disruption.ConsolidateAfter
	if after.Duration == nil {
		v := c.verdict(KindConsolidationDisabled, e.Reason())
		return false, &v
	}
	if !c.Empty() {
		v := c.verdict(KindNotEmpty, e.Reason())
		v.Pods = podKeys(c.Reschedulable, 5)
		return false, &v
	}
	if !conditionTrue(c.NodeClaim, v1.ConditionTypeConsolidatable) {
		v := c.verdict(KindNotConsolidatable, e.Reason())
		if base := consolidateBase(c); !base.IsZero() {
			until := base.Add(*after.Duration)
			v.Until = &until
		}
		return false, &v
	}
	return true, nil
}

// consolidateBase is when consolidateAfter started counting: the last pod
// event, else initialization.
func consolidateBase(c *Candidate) time.Time {
	if t := c.NodeClaim.Status.LastPodEventTime; !t.IsZero() {
		return t.Time
	}
	if cond := condition(c.NodeClaim, v1.ConditionTypeInitialized); cond != nil && cond.Status == "True" {
		return cond.LastTransitionTime.Time
	}
	return time.Time{}
}

// ComputeCommands implements Method.
func (e Emptiness) ComputeCommands(env *Env, budgets map[string]*BudgetStatus, cs []*Candidate) ([]*Command, []Verdict, error) {
	// Budget-limited, the priciest empty nodes go first.
	sortBySavingsRatio(env.Snapshot, cs)
	var picked []*Candidate
	var verdicts []Verdict
	for _, c := range cs {
		b := budgets[c.NodePool.Name]
		if remaining(budgets, c.NodePool.Name) <= 0 {
			verdicts = append(verdicts, budgetVerdict(c, e.Reason(), b))
			continue
		}
		b.Remaining--
		picked = append(picked, c)
	}
	if len(picked) == 0 {
		return nil, verdicts, nil
	}
	return []*Command{{Method: e, Candidates: picked}}, verdicts, nil
}
