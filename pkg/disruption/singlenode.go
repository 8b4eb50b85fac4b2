package disruption

import (
	"fmt"
	"sort"
	"sync"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// SingleNodeConsolidation removes one underutilized node at a time
// (reason Underutilized): delete it when its pods fit elsewhere, else
// replace it with exactly one strictly cheaper NodeClaim. Candidates are
// taken by savings ratio, interleaved across NodePools; pools a
// timed-out pass did not reach go first in the next one.
type SingleNodeConsolidation struct {
	Options ConsolidationOptions
	// unseen carries the pools a timed-out pass did not reach (shared by
	// copies of the method).
	unseen *unseenPools
}

type unseenPools struct {
	mu    sync.Mutex
	pools map[string]bool
}

// NewSingleNodeConsolidation returns the method with its fairness state.
func NewSingleNodeConsolidation(opts ConsolidationOptions) SingleNodeConsolidation {
	return SingleNodeConsolidation{Options: opts, unseen: &unseenPools{pools: map[string]bool{}}}
}

func (SingleNodeConsolidation) Reason() v1.DisruptionReason { return v1.DisruptionReasonUnderutilized }
func (SingleNodeConsolidation) Class() Class                { return Graceful }
func (SingleNodeConsolidation) ConsolidationType() string   { return ConsolidationTypeSingle }

// ShouldDisrupt implements Method.
func (SingleNodeConsolidation) ShouldDisrupt(snap *Snapshot, c *Candidate) (bool, *Verdict) {
	return consolidationPrecondition(snap, c)
}

// ComputeCommands implements Method.
func (s SingleNodeConsolidation) ComputeCommands(env *Env, budgets map[string]*BudgetStatus, cs []*Candidate) ([]*Command, []Verdict, error) {
	cs = s.interleave(env.Snapshot, cs)
	k := newConsolidation(env, s.Options, ConsolidationTypeSingle)
	expired := s.Options.deadline(orDefault(s.Options.SingleNodeTimeout, DefaultSingleNodeTimeout))
	var verdicts []Verdict
	seen := map[string]bool{}
	for i, c := range cs {
		if expired() {
			s.Options.timedOut(ConsolidationTypeSingle)
			s.remember(cs[i:], seen)
			for _, rest := range cs[i:] {
				verdicts = append(verdicts, rest.verdict(KindConsolidationTimeout, s.Reason()))
			}
			return nil, verdicts, nil
		}
		seen[c.NodePool.Name] = true
		if remaining(budgets, c.NodePool.Name) <= 0 {
			verdicts = append(verdicts, budgetVerdict(c, s.Reason(), budgets[c.NodePool.Name]))
			continue
		}
		if c.Empty() {
			continue
		}
		if c.NodePool.Spec.Disruption.ConsolidationPolicy == v1.ConsolidationPolicyBalanced {
			// The best a node can do alone is an outright delete; when even
			// that scores too low, no move of it passes.
			if k.balance == nil {
				k.balance = newBalancedTotals(env.Snapshot)
			}
			if best, err := k.balance.deleteScore(c); err == nil && !best.Approved {
				v := c.verdict(KindBalancedRejected, s.Reason())
				v.Consolidation = &ConsolidationDetail{Price: best.Savings, Score: best}
				v.Unconsolidatable = true
				verdicts = append(verdicts, v)
				continue
			}
		}
		cmd, v, err := k.compute([]*Candidate{c})
		if err != nil {
			// Upstream logs and goes on with the next candidate.
			sv := c.verdict(KindSimulationFailed, s.Reason())
			sv.Detail = fmt.Sprintf("computing consolidation: %v", err)
			verdicts = append(verdicts, sv)
			continue
		}
		if cmd == nil {
			if v != nil {
				verdicts = append(verdicts, *v)
			}
			continue
		}
		cmd.Method = s
		for _, rest := range cs[i+1:] {
			if remaining(budgets, rest.NodePool.Name) <= 0 {
				verdicts = append(verdicts, budgetVerdict(rest, s.Reason(), budgets[rest.NodePool.Name]))
			} else if !rest.Empty() {
				verdicts = append(verdicts, rest.verdict(KindConsolidationDeferred, s.Reason()))
			}
		}
		s.forget()
		return []*Command{cmd}, verdicts, nil
	}
	s.forget()
	return nil, verdicts, nil
}

// interleave sorts candidates by savings ratio (sortBySavingsRatio) and
// then takes one from each pool in turn, so one large pool does not
// starve the rest within the timeout; pools a timed-out pass missed come
// first.
func (s SingleNodeConsolidation) interleave(snap *Snapshot, cs []*Candidate) []*Candidate {
	sortBySavingsRatio(snap, cs)
	byPool := map[string][]*Candidate{}
	var order []string
	for _, c := range cs {
		name := c.NodePool.Name
		if _, ok := byPool[name]; !ok {
			order = append(order, name)
		}
		byPool[name] = append(byPool[name], c)
	}
	if s.unseen != nil {
		s.unseen.mu.Lock()
		first := s.unseen.pools
		s.unseen.mu.Unlock()
		sort.SliceStable(order, func(i, j int) bool { return first[order[i]] && !first[order[j]] })
	}
	out := make([]*Candidate, 0, len(cs))
	for len(out) < len(cs) {
		for _, name := range order {
			if q := byPool[name]; len(q) > 0 {
				out = append(out, q[0])
				byPool[name] = q[1:]
			}
		}
	}
	return out
}

func (s SingleNodeConsolidation) remember(rest []*Candidate, seen map[string]bool) {
	if s.unseen == nil {
		return
	}
	pools := map[string]bool{}
	for _, c := range rest {
		if !seen[c.NodePool.Name] {
			pools[c.NodePool.Name] = true
		}
	}
	s.unseen.mu.Lock()
	s.unseen.pools = pools
	s.unseen.mu.Unlock()
}

func (s SingleNodeConsolidation) forget() {
	if s.unseen == nil {
		return
	}
	s.unseen.mu.Lock()
	s.unseen.pools = map[string]bool{}
	s.unseen.mu.Unlock()
}
