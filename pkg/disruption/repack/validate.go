package repack

import (
	"fmt"
	"math"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// priceSlack absorbs float noise when the planner's replacement prices are
// compared with a fresh simulation's.
const priceSlack = 1e-9

// Validate implements disruption.Strategy. The plan's commands are checked
// together (ValidatePlan): they share the room of the nodes they keep. The
// accepted ones' candidates are checked once more against a fresher
// snapshot, keeping the longest prefix still valid (only prefixes were
// simulated together). Then the planner plans again on fresh state and
// keeps the commands whose candidates the new plan still moves (stillPlanned).
func (s *Strategy) Validate(state disruption.FreshState, cmds []*disruption.Command) ([]*disruption.Command, []disruption.Abandoned, error) {
	var dropped []disruption.Abandoned
	snap, err := state.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	sim := state.Simulator()
	if sim == nil {
		return nil, nil, fmt.Errorf("validating consolidation: no scheduling simulator")
	}
	results, err := ValidatePlan(snap, cmds, sim)
	if err != nil {
		return nil, nil, err
	}
	var accepted []*disruption.Command
	for _, r := range results {
		if r.Err != nil {
			dropped = append(dropped, disruption.Abandoned{Command: r.Command, Err: r.Err})
			continue
		}
		cp := *r.Command
		cp.Candidates = r.Fresh
		accepted = append(accepted, &cp)
	}
	if len(accepted) == 0 {
		return nil, dropped, nil
	}
	if snap, err = state.Snapshot(); err != nil {
		return nil, nil, err
	}
	kept, err := RevalidatePlan(snap, accepted)
	if err != nil {
		for _, cmd := range accepted[len(kept):] {
			dropped = append(dropped, disruption.Abandoned{Command: cmd, Err: err})
		}
	}
	if len(kept) == 0 {
		return nil, dropped, nil
	}
	kept, stale, err := s.stillPlanned(state, kept)
	return kept, append(dropped, stale...), err
}

// stillPlanned plans again on fresh state and keeps the commands whose
// candidates the new plan still moves. A plan is made for the fleet of its
// pass; when pods come and go during the validation delay (a scale-in
// still deleting pods), a command can remain feasible yet no longer be
// worth it: a plan made while a scale-in's pods were still terminating
// would delete full nodes into room the fresh plan gives to the emptied
// ones. The next pass plans the rest.
func (s *Strategy) stillPlanned(state disruption.FreshState, cmds []*disruption.Command) ([]*disruption.Command, []disruption.Abandoned, error) {
	snap, err := state.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	again, err := disruption.Disrupt(snap, []disruption.Method{s.planner}, state.Simulator())
	if err != nil {
		return nil, nil, err
	}
	picked := map[string]bool{}
	for _, cmd := range again.Commands {
		for _, cand := range cmd.Candidates {
			picked[cand.Name()] = true
		}
	}
	// Why the fresh plan leaves a node: its last verdict (the planner's
	// own comes after the generic ones).
	why := map[string]disruption.Kind{}
	for _, e := range again.Explanations {
		if n := len(e.Verdicts); n > 0 {
			why[e.Node] = e.Verdicts[n-1].Kind
		}
	}
	var kept []*disruption.Command
	var dropped []disruption.Abandoned
	for _, cmd := range cmds {
		var gone string
		for _, cand := range cmd.Candidates {
			if !picked[cand.Name()] {
				gone = cand.Name()
				break
			}
		}
		if gone == "" {
			kept = append(kept, cmd)
			continue
		}
		err := disruption.Invalidf("a fresh plan no longer moves node %s", gone)
		if k := why[gone]; k != "" {
			err = disruption.Invalidf("a fresh plan no longer moves node %s (%s)", gone, k)
		}
		dropped = append(dropped, disruption.Abandoned{Command: cmd, Err: err})
	}
	return kept, dropped, nil
}

// PlanTypes are the instance types cmds would launch, by NodePool.
func PlanTypes(cmds []*disruption.Command) map[string]map[string]bool {
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

// validatePlanned simulates removing cands (the union of cmds' fresh
// candidates) with new NodeClaims limited to cmds' types, and accepts
// when every moved pod is placed, none on an excluded destination, on
// replacements costing no more in total than cmds'.
func validatePlanned(snap *disruption.Snapshot, cands []*disruption.Candidate, cmds []*disruption.Command, sim disruption.Simulator) error {
	window := disruption.ConsolidateAfterWindow(snap)
	res, err := sim.Simulate(cands, disruption.SimulationOptions{Exclude: window, Types: PlanTypes(cmds)})
	if err != nil {
		return fmt.Errorf("simulating scheduling: %w", err)
	}
	if len(res.Unschedulable) > 0 || len(disruption.PlacedOn(res, cands, window)) > 0 {
		return disruption.Invalidf("all pending pods could not be scheduled")
	}
	planned := 0.0
	for _, cmd := range cmds {
		planned += disruption.ReplacementsPrice(cmd.Replacements)
	}
	if got := disruption.ReplacementsPrice(res.Replacements); got > planned+priceSlack || math.IsInf(got, 1) {
		return disruption.Invalidf("scheduling simulation produced new results: replacements would cost $%.4f/h, the command's $%.4f/h", got, planned)
	}
	return nil
}

// PlanValidation is one command's outcome in ValidatePlan.
type PlanValidation struct {
	Command *disruption.Command
	// Fresh are the command's candidates in the fresh snapshot (nil when
	// Err is set).
	Fresh []*disruption.Candidate
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
// of the accepted commands was validated jointly.
func ValidatePlan(snap *disruption.Snapshot, cmds []*disruption.Command, sim disruption.Simulator) ([]PlanValidation, error) {
	if sim == nil {
		return nil, fmt.Errorf("validating consolidation: no scheduling simulator")
	}
	found := disruption.Eligible(snap)
	all := disruption.AllBudgets(snap)
	if out, ok, err := validateAllAtOnce(snap, found, all, cmds, sim); err != nil || ok {
		return out, err
	}
	budgets := map[string]map[string]*disruption.BudgetStatus{}
	out := make([]PlanValidation, 0, len(cmds))
	var union []*disruption.Candidate
	var accepted []*disruption.Command
	for _, cmd := range cmds {
		reason := string(cmd.Method.Reason())
		if budgets[reason] == nil {
			budgets[reason] = disruption.CloneBudgets(all[cmd.Method.Reason()])
		}
		trial := disruption.CloneBudgets(budgets[reason])
		fresh, err := disruption.FreshCandidates(snap, found, trial, cmd)
		if err == nil && len(fresh) == 0 {
			err = disruption.Invalidf("no candidates")
		}
		if err == nil {
			err = validatePlanned(snap, append(append([]*disruption.Candidate(nil), union...), fresh...), append(append([]*disruption.Command(nil), accepted...), cmd), sim)
		}
		if err != nil {
			if !disruption.IsValidationError(err) {
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
func validateAllAtOnce(snap *disruption.Snapshot, found map[string]*disruption.Candidate, all map[v1.DisruptionReason]map[string]*disruption.BudgetStatus, cmds []*disruption.Command, sim disruption.Simulator) ([]PlanValidation, bool, error) {
	if len(cmds) < 2 {
		return nil, false, nil
	}
	kept, err := freshPrefix(snap, found, all, cmds)
	if err != nil || len(kept) < len(cmds) {
		return nil, false, nil
	}
	out := make([]PlanValidation, 0, len(cmds))
	var union []*disruption.Candidate
	for i, k := range kept {
		if len(k.Candidates) == 0 {
			return nil, false, nil
		}
		union = append(union, k.Candidates...)
		out = append(out, PlanValidation{Command: cmds[i], Fresh: k.Candidates})
	}
	if err := validatePlanned(snap, union, cmds, sim); err != nil {
		if !disruption.IsValidationError(err) {
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
func RevalidatePlan(snap *disruption.Snapshot, cmds []*disruption.Command) ([]*disruption.Command, error) {
	return freshPrefix(snap, disruption.Eligible(snap), disruption.AllBudgets(snap), cmds)
}

// freshPrefix is RevalidatePlan over candidates and budgets already
// found.
func freshPrefix(snap *disruption.Snapshot, found map[string]*disruption.Candidate, all map[v1.DisruptionReason]map[string]*disruption.BudgetStatus, cmds []*disruption.Command) ([]*disruption.Command, error) {
	budgets := map[string]map[string]*disruption.BudgetStatus{}
	var kept []*disruption.Command
	for _, cmd := range cmds {
		reason := string(cmd.Method.Reason())
		if budgets[reason] == nil {
			budgets[reason] = disruption.CloneBudgets(all[cmd.Method.Reason()])
		}
		fresh, err := disruption.FreshCandidates(snap, found, budgets[reason], cmd)
		if err != nil {
			return kept, err
		}
		cp := *cmd
		cp.Candidates = fresh
		kept = append(kept, &cp)
	}
	return kept, nil
}
