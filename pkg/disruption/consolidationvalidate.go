package disruption

import (
	"errors"
	"fmt"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// ValidationError says a consolidation command no longer holds after the
// validation delay; the command is abandoned.
type ValidationError struct{ msg string }

func (e *ValidationError) Error() string { return e.msg }

// IsValidationError reports whether err is a ValidationError.
func IsValidationError(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

func invalid(format string, args ...any) error {
	return &ValidationError{msg: fmt.Sprintf(format, args...)}
}

// Invalidf is a ValidationError for a strategy's own validation.
func Invalidf(format string, args ...any) error { return invalid(format, args...) }

// ValidateCandidates checks, against a fresh snapshot, that every
// candidate of cmd is still one for its method (eligible, not nominated,
// no blocking pod) and within its pool's budget. It returns the fresh
// candidates, in cmd's order.
func ValidateCandidates(snap *Snapshot, cmd *Command) ([]*Candidate, error) {
	budgets := CloneBudgets(AllBudgets(snap)[cmd.Method.Reason()])
	return FreshCandidates(snap, byName(discover(snap)), budgets, cmd)
}

// Eligible are snap's candidates by node name, before any method's own
// filter: what validation checks commands against.
func Eligible(snap *Snapshot) map[string]*Candidate { return byName(discover(snap)) }

func byName(found *candidates) map[string]*Candidate {
	out := map[string]*Candidate{}
	for _, c := range found.all {
		out[c.Name()] = c
	}
	return out
}

// FreshCandidates is ValidateCandidates over candidates already found
// (Eligible), taking budget from budgets (decremented only when every
// candidate is still valid).
func FreshCandidates(snap *Snapshot, found map[string]*Candidate, budgets map[string]*BudgetStatus, cmd *Command) ([]*Candidate, error) {
	fresh := make([]*Candidate, 0, len(cmd.Candidates))
	gone := 0
	for _, old := range cmd.Candidates {
		c := found[old.Name()]
		if c == nil || (c.PodBlocker != nil && cmd.Method.Class() != Eventual) {
			gone++
			continue
		}
		if ok, _ := cmd.Method.ShouldDisrupt(snap, c); !ok {
			gone++
			continue
		}
		fresh = append(fresh, c)
	}
	if gone > 0 {
		return nil, invalid("%d candidates are no longer valid", gone)
	}
	need := map[string]int{}
	for _, c := range fresh {
		need[c.NodePool.Name]++
	}
	for pool, n := range need {
		if remaining(budgets, pool) < n {
			return nil, invalid("a candidate can no longer be disrupted without violating budgets")
		}
	}
	for pool, n := range need {
		budgets[pool].Remaining -= n
	}
	return fresh, nil
}

// ValidateCommand re-simulates cmd's candidates (fresh ones, from
// ValidateCandidates) and checks the answer still supports it by
// upstream's rule: every pod placed; no replacement when none was planned;
// one when one was, whose types include every type the command would
// launch (the simulation applies no price filter, so it may offer more).
func ValidateCommand(snap *Snapshot, cmd *Command, fresh []*Candidate, sim Simulator) error {
	if len(fresh) == 0 {
		return invalid("no candidates")
	}
	if sim == nil {
		return fmt.Errorf("validating consolidation: no scheduling simulator")
	}
	window := ConsolidateAfterWindow(snap)
	res, err := sim.Simulate(fresh, SimulationOptions{Exclude: window})
	if err != nil {
		return fmt.Errorf("simulating scheduling: %w", err)
	}
	if len(res.Unschedulable) > 0 || len(PlacedOn(res, fresh, window)) > 0 {
		return invalid("all pending pods could not be scheduled")
	}
	switch {
	case len(res.Replacements) == 0 && len(cmd.Replacements) == 0:
		return nil
	case len(res.Replacements) != 1 || len(cmd.Replacements) != 1:
		return invalid("scheduling simulation produced new results")
	}
	offered := map[string]bool{}
	for _, it := range res.Replacements[0].InstanceTypes {
		offered[it.Name] = true
	}
	for _, it := range cmd.Replacements[0].InstanceTypes {
		if !offered[it.Name] {
			return invalid("scheduling simulation produced new results")
		}
	}
	return nil
}

// CommandSaving is what cmd saves per hour: its candidates' price less its
// replacements' launch price.
func CommandSaving(snap *Snapshot, cmd *Command) (float64, error) {
	before, err := candidatesPrice(snap, cmd.Candidates)
	if err != nil {
		return 0, err
	}
	return before - ReplacementsPrice(cmd.Replacements), nil
}

// ReplacementsPrice is what replacements cost at launch ($/h): for each,
// the cheapest worst launch price among its types.
func ReplacementsPrice(rs []*scheduling.NewNodeClaim) float64 {
	total := 0.0
	for _, r := range rs {
		total += replacementPrice(r)
	}
	return total
}
