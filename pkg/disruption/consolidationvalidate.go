package disruption

import (
	"errors"
	"fmt"
	"math"
	"sort"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
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

// priceSlack absorbs float noise when the planner's replacement prices are
// compared with a fresh simulation's.
const priceSlack = 1e-9

// UpstreamValidation reports whether cmd is validated by upstream's exact
// rule (its multi- and single-node consolidation); other consolidation
// methods (the repacking planner) are validated as plans.
func UpstreamValidation(cmd *Command) bool {
	switch cmd.Method.ConsolidationType() {
	case ConsolidationTypeMulti, ConsolidationTypeSingle:
		return true
	}
	return false
}

// ValidateCandidates checks, against a fresh snapshot, that every
// candidate of cmd is still one for its method (eligible, not nominated,
// no blocking pod) and within its pool's budget. It returns the fresh
// candidates, in cmd's order.
func ValidateCandidates(snap *Snapshot, cmd *Command) ([]*Candidate, error) {
	budgets := cloneBudgets(AllBudgets(snap)[cmd.Method.Reason()])
	return freshCandidates(snap, byName(discover(snap)), budgets, cmd)
}

func byName(found *candidates) map[string]*Candidate {
	out := map[string]*Candidate{}
	for _, c := range found.all {
		out[c.Name()] = c
	}
	return out
}

// freshCandidates is ValidateCandidates over candidates already found,
// taking budget from budgets (decremented only when every candidate is
// still valid).
func freshCandidates(snap *Snapshot, found map[string]*Candidate, budgets map[string]*BudgetStatus, cmd *Command) ([]*Candidate, error) {
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
// ValidateCandidates) and checks the answer still supports it. Upstream's
// methods keep upstream's rule: every pod placed; no replacement when none
// was planned; one when one was, whose types include every type the
// command would launch (the simulation applies no price filter, so it may
// offer more). Other methods' commands (the planner's splits and N→M
// moves) are checked as plans: every pod placed, on replacements of the
// command's instance types costing no more in total than the command's.
func ValidateCommand(snap *Snapshot, cmd *Command, fresh []*Candidate, sim Simulator) error {
	if len(fresh) == 0 {
		return invalid("no candidates")
	}
	if sim == nil {
		return fmt.Errorf("validating consolidation: no scheduling simulator")
	}
	if !UpstreamValidation(cmd) {
		return validatePlanned(snap, fresh, []*Command{cmd}, sim)
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

// PlanSimulator is a Simulator that can also plan the candidates' pods
// with new NodeClaims limited to some instance types per NodePool (types;
// a pool it does not name launches nothing) and keep them off excluded
// destinations. Plan validation uses it so that a split is checked
// against machines of the sizes it launches, not against the one larger
// machine the plain solver would pack the pods onto.
type PlanSimulator interface {
	Simulator
	SimulatePlan(candidates []*Candidate, excluded map[string]bool, types map[string]map[string]bool) (*Simulation, error)
}

// PlanTypes are the instance types cmds would launch, by NodePool.
func PlanTypes(cmds []*Command) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, cmd := range cmds {
		for _, r := range cmd.Replacements {
			if out[r.NodePool] == nil {
				out[r.NodePool] = map[string]bool{}
			}
			for _, it := range r.InstanceTypes {
				out[r.NodePool][it.Name] = true
			}
		}
	}
	return out
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

// validatePlanned simulates removing cands (the union of cmds' fresh
// candidates) with new NodeClaims limited to cmds' types, and accepts
// when every moved pod is placed, none on an excluded destination, on
// replacements costing no more in total than cmds'.
func validatePlanned(snap *Snapshot, cands []*Candidate, cmds []*Command, sim Simulator) error {
	window := ConsolidateAfterWindow(snap)
	var res *Simulation
	var err error
	if ps, ok := sim.(PlanSimulator); ok {
		res, err = ps.SimulatePlan(cands, window, PlanTypes(cmds))
	} else {
		res, err = simulateExcluding(sim, cands, window)
	}
	if err != nil {
		return fmt.Errorf("simulating scheduling: %w", err)
	}
	if len(res.Unschedulable) > 0 || len(placedOn(res, cands, window)) > 0 {
		return invalid("all pending pods could not be scheduled")
	}
	planned := 0.0
	for _, cmd := range cmds {
		planned += ReplacementsPrice(cmd.Replacements)
	}
	if got := ReplacementsPrice(res.Replacements); got > planned+priceSlack || math.IsInf(got, 1) {
		return invalid("scheduling simulation produced new results: replacements would cost $%.4f/h, the command's $%.4f/h", got, planned)
	}
	return nil
}

// PlanValidation is one command's outcome in ValidatePlan.
type PlanValidation struct {
	Command *Command
	// Fresh are the command's candidates in the fresh snapshot (nil when
	// Err is set).
	Fresh []*Candidate
	// Err is a ValidationError when the command is abandoned.
	Err error
}

// ValidatePlan validates a pass's commands together, in order, against
// one fresh snapshot: the planner's moves share the free room of the
// nodes they keep and never use each other's candidates as destinations,
// so each command is checked with the candidates of the commands already
// accepted removed too, within the budgets they already took. A command
// is accepted when its candidates are still valid and within budget and
// the joint simulation still places every moved pod, on replacements (of
// the accepted commands' types) costing no more than theirs. Any prefix
// of the accepted commands was validated jointly. Upstream's methods'
// commands go through ValidateCommand one by one instead.
func ValidatePlan(snap *Snapshot, cmds []*Command, sim Simulator) ([]PlanValidation, error) {
	if sim == nil {
		return nil, fmt.Errorf("validating consolidation: no scheduling simulator")
	}
	found := byName(discover(snap))
	all := AllBudgets(snap)
	if out, ok, err := validateAllAtOnce(snap, found, all, cmds, sim); err != nil || ok {
		return out, err
	}
	budgets := map[string]map[string]*BudgetStatus{}
	out := make([]PlanValidation, 0, len(cmds))
	var union []*Candidate
	var accepted []*Command
	for _, cmd := range cmds {
		reason := string(cmd.Method.Reason())
		if budgets[reason] == nil {
			budgets[reason] = cloneBudgets(all[cmd.Method.Reason()])
		}
		trial := cloneBudgets(budgets[reason])
		fresh, err := freshCandidates(snap, found, trial, cmd)
		if err == nil && len(fresh) == 0 {
			err = invalid("no candidates")
		}
		if err == nil {
			err = validatePlanned(snap, append(append([]*Candidate(nil), union...), fresh...), append(append([]*Command(nil), accepted...), cmd), sim)
		}
		if err != nil {
			if !IsValidationError(err) {
				return nil, err
			}
			out = append(out, PlanValidation{Command: cmd, Err: err})
			continue
		}
		budgets[reason] = trial
		union = append(union, fresh...)
		accepted = append(accepted, cmd)
		out = append(out, PlanValidation{Command: cmd, Fresh: fresh})
	}
	return out, nil
}

// validateAllAtOnce accepts every command with one joint simulation when
// all their candidates are still valid and within budget and the
// simulation of all of them holds: a plan of twenty commands then costs
// one solve instead of twenty (each growing), seconds of the validation
// delay's end at a thousand nodes. ok is false when something fails; the
// caller then finds, command by command, which to keep.
func validateAllAtOnce(snap *Snapshot, found map[string]*Candidate, all map[v1.DisruptionReason]map[string]*BudgetStatus, cmds []*Command, sim Simulator) ([]PlanValidation, bool, error) {
	if len(cmds) < 2 {
		return nil, false, nil
	}
	kept, err := freshPrefix(snap, found, all, cmds)
	if err != nil || len(kept) < len(cmds) {
		return nil, false, nil
	}
	out := make([]PlanValidation, 0, len(cmds))
	var union []*Candidate
	for i, k := range kept {
		if len(k.Candidates) == 0 {
			return nil, false, nil
		}
		union = append(union, k.Candidates...)
		out = append(out, PlanValidation{Command: cmds[i], Fresh: k.Candidates})
	}
	if err := validatePlanned(snap, union, cmds, sim); err != nil {
		if !IsValidationError(err) {
			return nil, false, err
		}
		return nil, false, nil
	}
	return out, true, nil
}

// RevalidatePlan checks the accepted commands' candidates once more
// against a fresher snapshot (pods may have landed while simulating),
// with shared budgets, and keeps the longest valid prefix: only a prefix
// was simulated jointly. It returns the kept commands with fresh
// candidates, and the first failure.
func RevalidatePlan(snap *Snapshot, cmds []*Command) ([]*Command, error) {
	return freshPrefix(snap, byName(discover(snap)), AllBudgets(snap), cmds)
}

// freshPrefix is RevalidatePlan over candidates and budgets already
// found.
func freshPrefix(snap *Snapshot, found map[string]*Candidate, all map[v1.DisruptionReason]map[string]*BudgetStatus, cmds []*Command) ([]*Command, error) {
	budgets := map[string]map[string]*BudgetStatus{}
	var kept []*Command
	for _, cmd := range cmds {
		reason := string(cmd.Method.Reason())
		if budgets[reason] == nil {
			budgets[reason] = cloneBudgets(all[cmd.Method.Reason()])
		}
		fresh, err := freshCandidates(snap, found, budgets[reason], cmd)
		if err != nil {
			return kept, err
		}
		cp := *cmd
		cp.Candidates = fresh
		kept = append(kept, &cp)
	}
	return kept, nil
}

// SimulatePlan implements PlanSimulator.
func (s SolverSimulator) SimulatePlan(cs []*Candidate, excluded map[string]bool, types map[string]map[string]bool) (*Simulation, error) {
	extra := s.Extra
	s.Extra = func(in *scheduling.Input) {
		in.NodePools = RestrictPools(in.NodePools, types)
		if extra != nil {
			extra(in)
		}
	}
	return s.SimulateExcluding(cs, excluded)
}

// RestrictPools copies the solver pools keeping only the named instance
// types of each (a pool types does not name is dropped), in order.
func RestrictPools(pools []*scheduling.NodePool, types map[string]map[string]bool) []*scheduling.NodePool {
	var out []*scheduling.NodePool
	for _, sp := range pools {
		allowed := types[sp.Name]
		if len(allowed) == 0 {
			continue
		}
		cp := *sp
		cp.InstanceTypes = nil
		for _, it := range sp.InstanceTypes {
			if allowed[it.Name] {
				cp.InstanceTypes = append(cp.InstanceTypes, it)
			}
		}
		if len(cp.InstanceTypes) > 0 {
			out = append(out, &cp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}
