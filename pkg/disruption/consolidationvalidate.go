package disruption

import (
	"errors"
	"fmt"
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

// ValidateCandidates checks, against a fresh snapshot, that every
// candidate of cmd is still one for its method (eligible, not nominated,
// no blocking pod) and within its pool's budget. It returns the fresh
// candidates, in cmd's order.
func ValidateCandidates(snap *Snapshot, cmd *Command) ([]*Candidate, error) {
	found := discover(snap)
	byName := map[string]*Candidate{}
	for _, c := range found.all {
		byName[c.Name()] = c
	}
	budgets := cloneBudgets(AllBudgets(snap)[cmd.Method.Reason()])
	fresh := make([]*Candidate, 0, len(cmd.Candidates))
	gone := 0
	for _, old := range cmd.Candidates {
		c := byName[old.Name()]
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
	for _, c := range fresh {
		if remaining(budgets, c.NodePool.Name) <= 0 {
			return nil, invalid("a candidate can no longer be disrupted without violating budgets")
		}
		budgets[c.NodePool.Name].Remaining--
	}
	return fresh, nil
}

// ValidateCommand re-simulates cmd's candidates (fresh ones, from
// ValidateCandidates) and checks the answer still supports it: every pod
// placed; no replacement when none was planned; one when one was, whose
// types include every type the command would launch (the simulation
// applies no price filter, so it may offer more).
func ValidateCommand(snap *Snapshot, cmd *Command, fresh []*Candidate, sim Simulator) error {
	if len(fresh) == 0 {
		return invalid("no candidates")
	}
	if sim == nil {
		return fmt.Errorf("validating consolidation: no scheduling simulator")
	}
	res, err := simulateExcluding(sim, fresh, ConsolidateAfterWindow(snap))
	if err != nil {
		return fmt.Errorf("simulating scheduling: %w", err)
	}
	if len(res.Unschedulable) > 0 || len(placedOn(res, fresh, ConsolidateAfterWindow(snap))) > 0 {
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
