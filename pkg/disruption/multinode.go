package disruption

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// MultiNodeConsolidation removes several underutilized nodes at once,
// launching at most one cheaper NodeClaim for their pods (reason
// Underutilized): the candidates sorted by price over reschedule
// disruption cost (sortBySavingsRatio), the first 100 the budgets allow,
// and a binary search for the longest prefix of at least two that can go.
type MultiNodeConsolidation struct {
	Options ConsolidationOptions
}

func (MultiNodeConsolidation) Reason() v1.DisruptionReason { return v1.DisruptionReasonUnderutilized }
func (MultiNodeConsolidation) Class() Class                { return Graceful }
func (MultiNodeConsolidation) ConsolidationType() string   { return ConsolidationTypeMulti }

// ShouldDisrupt implements Method.
func (MultiNodeConsolidation) ShouldDisrupt(snap *Snapshot, c *Candidate) (bool, *Verdict) {
	return consolidationPrecondition(snap, c)
}

// ComputeCommands implements Method. When it finds nothing it explains
// nothing: single-node consolidation runs next and explains each node.
func (m MultiNodeConsolidation) ComputeCommands(env *Env, budgets map[string]*BudgetStatus, cs []*Candidate) ([]*Command, []Verdict, error) {
	sortBySavingsRatio(env.Snapshot, cs)
	kept, budgetVerdicts, _ := consolidationBudget(budgets, cs, true)
	if len(kept) > MaxMultiNodeCandidates {
		kept = kept[:MaxMultiNodeCandidates]
	}
	if len(kept) < 2 {
		// One candidate is single-node consolidation's case.
		return nil, nil, nil
	}
	k := newConsolidation(env, m.Options, ConsolidationTypeMulti)
	expired := m.Options.deadline(orDefault(m.Options.MultiNodeTimeout, DefaultMultiNodeTimeout))
	var last *Command
	lo, hi := 1, len(kept)-1
	for lo <= hi {
		if expired() {
			m.Options.timedOut(ConsolidationTypeMulti)
			break
		}
		mid := (lo + hi) / 2
		prefix := kept[:mid+1]
		cmd, _, err := k.compute(prefix)
		if err != nil {
			return nil, nil, err
		}
		ok := cmd != nil
		if ok && len(cmd.Replacements) > 0 {
			its := filterOutSameInstanceType(env.Snapshot, cmd.Replacements[0], prefix)
			its = withoutCandidateOfferings(its, cmd.Replacements[0].Requirements, prefix)
			ok = len(its) > 0
			if ok {
				cmd.Replacements[0].Narrow(its)
			}
		}
		if ok {
			last, lo = cmd, mid+1
		} else {
			hi = mid - 1
		}
	}
	if last == nil {
		return nil, nil, nil
	}
	last.Method = m
	in := map[*Candidate]bool{}
	for _, c := range last.Candidates {
		in[c] = true
	}
	verdicts := budgetVerdicts
	for _, c := range kept {
		if !in[c] {
			verdicts = append(verdicts, c.verdict(KindConsolidationDeferred, m.Reason()))
		}
	}
	return []*Command{last}, verdicts, nil
}

// filterOutSameInstanceType drops, when the replacement may be one of the
// removed nodes' types, every type as expensive as the cheapest such
// removed node: replacing [big, big, small] with one small is just
// deleting the two big ones, with more pods moved.
func filterOutSameInstanceType(snap *Snapshot, r *scheduling.NewNodeClaim, cs []*Candidate) []*scheduling.InstanceType {
	existing := map[string]float64{}
	for _, c := range cs {
		labels := c.Node.Node.Labels
		name := labels[corev1.LabelInstanceTypeStable]
		it := instanceType(snap, c.NodePool.Name, name)
		if it == nil {
			continue
		}
		price, found := it.PriceFor(labels)
		if !found {
			continue
		}
		if have, ok := existing[name]; !ok || price < have {
			existing[name] = price
		}
	}
	max := math.Inf(1)
	for _, it := range r.InstanceTypes {
		if p, ok := existing[it.Name]; ok && p < max {
			max = p
		}
	}
	its, err := cheaperThan(r.InstanceTypes, r.Requirements, max)
	if err != nil {
		return nil
	}
	return its
}
