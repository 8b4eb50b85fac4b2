package disruption

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// validateConsolidation checks the consolidation commands against fresh
// state (after the validation delay). Upstream's methods are checked as
// upstream does, one command at a time: every candidate still eligible,
// not nominated and within budget; a fresh simulation still places every
// pod, wants a replacement exactly when the command has one, and offers
// every type the command would launch; then the candidates once more
// (pods may have landed meanwhile). The planner's commands are checked
// together (disruption.ValidatePlan): they share the room of the nodes
// they keep. A command that fails is abandoned and counted; the next pass
// starts afresh.
func (c *Controller) validateConsolidation(ctx context.Context, m disruption.Method, cmds []*disruption.Command) ([]*disruption.Command, error) {
	var upstream, planned []*disruption.Command
	for _, cmd := range cmds {
		if disruption.UpstreamValidation(cmd) {
			upstream = append(upstream, cmd)
		} else {
			planned = append(planned, cmd)
		}
	}
	var kept []*disruption.Command
	for _, cmd := range upstream {
		fresh, err := c.validateOne(ctx, cmd)
		if err != nil {
			if !disruption.IsValidationError(err) {
				return nil, err
			}
			c.abandoned(ctx, cmd, err)
			continue
		}
		cmd.Candidates = fresh
		kept = append(kept, cmd)
	}
	if len(planned) > 0 {
		ok, err := c.validatePlan(ctx, planned)
		if err != nil {
			return nil, err
		}
		if ok, err = c.stillPlanned(ctx, m, ok); err != nil {
			return nil, err
		}
		kept = append(kept, ok...)
	}
	return kept, nil
}

// abandoned logs and counts a command that failed validation.
func (c *Controller) abandoned(ctx context.Context, cmd *disruption.Command, err error) {
	metrics.FailedValidationsTotal.WithLabelValues(cmd.Method.ConsolidationType()).Inc()
	log.FromContext(ctx).V(1).Info("abandoning consolidation attempt due to pod churn, command is no longer valid",
		"reason", err.Error(), "consolidation-type", cmd.Method.ConsolidationType())
}

func (c *Controller) validateOne(ctx context.Context, cmd *disruption.Command) ([]*disruption.Candidate, error) {
	snap, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	fresh, err := disruption.ValidateCandidates(snap, cmd)
	if err != nil {
		return nil, err
	}
	if err := disruption.ValidateCommand(snap, cmd, fresh, c.simulatorFor(ctx)); err != nil {
		return nil, err
	}
	if snap, err = c.snapshot(ctx); err != nil {
		return nil, err
	}
	return disruption.ValidateCandidates(snap, &disruption.Command{Method: cmd.Method, Candidates: fresh})
}

// validatePlan checks the planner's commands jointly against one fresh
// snapshot, then the accepted ones' candidates against a fresher one,
// keeping the longest prefix still valid (only prefixes were simulated
// together).
func (c *Controller) validatePlan(ctx context.Context, cmds []*disruption.Command) ([]*disruption.Command, error) {
	snap, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if c.simulator == nil {
		return nil, fmt.Errorf("validating consolidation: no scheduling simulator")
	}
	results, err := disruption.ValidatePlan(snap, cmds, &planSimulator{passSimulator{ctx: ctx, sim: c.simulator}})
	if err != nil {
		return nil, err
	}
	var accepted []*disruption.Command
	for _, r := range results {
		if r.Err != nil {
			c.abandoned(ctx, r.Command, r.Err)
			continue
		}
		cp := *r.Command
		cp.Candidates = r.Fresh
		accepted = append(accepted, &cp)
	}
	if len(accepted) == 0 {
		return nil, nil
	}
	if snap, err = c.snapshot(ctx); err != nil {
		return nil, err
	}
	kept, err := disruption.RevalidatePlan(snap, accepted)
	if err != nil {
		for _, cmd := range accepted[len(kept):] {
			c.abandoned(ctx, cmd, err)
		}
	}
	return kept, nil
}

// stillPlanned plans again on fresh state and keeps the commands whose
// candidates the new plan still moves. A plan is made for the fleet of its
// pass; when pods come and go during the validation delay (a scale-in
// still deleting pods), a command can remain feasible yet no longer be
// worth it: after the end-to-end benchmark's scale-in, a plan made while
// the small pods were still terminating deleted full nodes into room the
// fresh plan gives to the emptied ones. Upstream's emptiness and drift
// are validated the same way (validate); the next pass plans the rest.
func (c *Controller) stillPlanned(ctx context.Context, method disruption.Method, cmds []*disruption.Command) ([]*disruption.Command, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	snap, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	again, err := disruption.Disrupt(snap, []disruption.Method{method}, c.simulatorFor(ctx))
	if err != nil {
		return nil, err
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
	for _, cmd := range cmds {
		var dropped string
		for _, cand := range cmd.Candidates {
			if !picked[cand.Name()] {
				dropped = cand.Name()
				break
			}
		}
		if dropped != "" {
			err := fmt.Errorf("a fresh plan no longer moves node %s", dropped)
			if k := why[dropped]; k != "" {
				err = fmt.Errorf("a fresh plan no longer moves node %s (%s)", dropped, k)
			}
			c.abandoned(ctx, cmd, err)
			continue
		}
		kept = append(kept, cmd)
	}
	return kept, nil
}

// PlanningSimulator is a Simulator that can limit new NodeClaims to some
// instance types per NodePool (a pool types does not name launches
// nothing) while keeping the moved pods off excluded destinations; the
// planner's commands are validated with it.
type PlanningSimulator interface {
	SimulatePlan(ctx context.Context, remove, exclude map[string]bool, types map[string]map[string]bool) (*Simulated, error)
}

// SimulatePlan implements PlanningSimulator.
func (s SnapshotSimulator) SimulatePlan(ctx context.Context, remove, exclude map[string]bool, types map[string]map[string]bool) (*Simulated, error) {
	snap, err := s.Builder.Build(ctx, snapshot.Request{Remove: remove})
	if err != nil {
		return nil, fmt.Errorf("building the simulation snapshot: %w", err)
	}
	in := *snap.Input
	in.NodePools = disruption.RestrictPools(in.NodePools, types)
	if len(exclude) > 0 {
		excludeDestinations(&in, snap.Moved, exclude)
	}
	return &Simulated{Input: &in, Result: scheduling.Solve(&in), NodePools: snap.NodePools, Moved: snap.Moved}, nil
}

// planSimulator adds disruption.PlanSimulator to a pass's simulator; a
// controller simulator that cannot restrict types is asked plainly (the
// price rule then judges the unrestricted plan).
type planSimulator struct{ passSimulator }

// SimulatePlan implements disruption.PlanSimulator.
func (p *planSimulator) SimulatePlan(cands []*disruption.Candidate, exclude map[string]bool, types map[string]map[string]bool) (*disruption.Simulation, error) {
	ps, ok := p.sim.(PlanningSimulator)
	if !ok {
		return p.SimulateExcluding(cands, exclude)
	}
	sim, err := ps.SimulatePlan(p.ctx, removal(cands), exclude, types)
	if err != nil {
		return nil, err
	}
	return disruption.InterpretSimulation(sim.Input, sim.Result, sim.Moved, exclude), nil
}
