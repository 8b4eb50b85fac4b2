package disruption

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// validateConsolidation waits the validation delay, then checks the
// consolidation command against fresh state as upstream does: every
// candidate still eligible, not nominated and within budget; a fresh
// simulation still places every pod, wants a replacement exactly when the
// command has one, and offers every type the command would launch; then
// the candidates once more (pods may have landed meanwhile). A command
// that fails is abandoned and counted; the next pass starts afresh.
func (c *Controller) validateConsolidation(ctx context.Context, d *disruption.Decision) (*disruption.Decision, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.clock.After(c.opts.ValidationDelay):
	}
	var kept []*disruption.Command
	for _, cmd := range d.Commands {
		fresh, err := c.validateOne(ctx, cmd)
		if err != nil {
			if !disruption.IsValidationError(err) {
				return nil, err
			}
			metrics.FailedValidationsTotal.WithLabelValues(cmd.Method.ConsolidationType()).Inc()
			log.FromContext(ctx).V(1).Info("abandoning consolidation attempt due to pod churn, command is no longer valid",
				"reason", err.Error(), "consolidation-type", cmd.Method.ConsolidationType())
			continue
		}
		cmd.Candidates = fresh
		kept = append(kept, cmd)
	}
	if len(kept) == 0 {
		return nil, nil
	}
	d.Commands = kept
	return d, nil
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
