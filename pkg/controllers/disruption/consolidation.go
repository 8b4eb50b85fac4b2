package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Consolidation event reasons (upstream's strings).
const (
	ReasonUnconsolidatable       = "Unconsolidatable"
	ReasonConsolidationApproved  = "ConsolidationApproved"
	ReasonConsolidationRejected  = "ConsolidationRejected"
	ReasonConsolidationCandidate = "ConsolidationCandidate"
)

// unconsolidatableDedupe is how long an identical Unconsolidatable event
// is not repeated (upstream: 15 minutes; a node's reason rarely changes
// between 10 s passes).
const unconsolidatableDedupe = 15 * time.Minute

// InstanceTypes resolves a NodePool's instance types; the cloud provider
// implements it.
type InstanceTypes interface {
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*scheduling.InstanceType, error)
}

// freshState is what validation reads after the validation delay: a new
// snapshot of cluster state at each call, and the pass's simulator.
type freshState struct {
	ctx context.Context
	c   *Controller
}

func (f freshState) Snapshot() (*disruption.Snapshot, error) { return f.c.snapshot(f.ctx) }
func (f freshState) Simulator() disruption.Simulator         { return f.c.simulatorFor(f.ctx) }

func (c *Controller) freshState(ctx context.Context) disruption.FreshState {
	return freshState{ctx: ctx, c: c}
}

// abandoned logs a command validation dropped, and counts it when it is a
// consolidation command (karpenter_voluntary_disruption_failed_validations_total).
func (c *Controller) abandoned(ctx context.Context, a disruption.Abandoned) {
	m := a.Command.Method
	if !disruption.IsConsolidation(m) {
		log.FromContext(ctx).V(1).Info("abandoning disruption command, no candidate is still valid", "reason", m.Reason())
		return
	}
	metrics.FailedValidationsTotal.WithLabelValues(m.ConsolidationType()).Inc()
	log.FromContext(ctx).V(1).Info("abandoning consolidation attempt due to pod churn, command is no longer valid",
		"reason", a.Err.Error(), "consolidation-type", m.ConsolidationType())
}

// instanceTypes resolves every dynamic pool's instance types for pricing;
// a pool whose types cannot be resolved is logged and left out (its nodes
// get an InstanceTypeNotFound verdict).
func (c *Controller) instanceTypes(ctx context.Context, pools map[string]*v1.NodePool) map[string][]*scheduling.InstanceType {
	if c.opts.InstanceTypes == nil {
		return nil
	}
	out := make(map[string][]*scheduling.InstanceType, len(pools))
	for name, np := range pools {
		if np.IsStatic() || !np.DeletionTimestamp.IsZero() {
			continue
		}
		its, err := c.opts.InstanceTypes.GetInstanceTypes(ctx, np)
		if err != nil {
			log.FromContext(ctx).Error(err, "resolving instance types for consolidation", "NodePool", klog.KRef("", name))
			continue
		}
		out[name] = its
	}
	return out
}

// publishConsolidation sends the consolidation verdicts of a pass:
// Unconsolidatable on the Node and NodeClaim with the rendered reason, and
// for Balanced rejections ConsolidationRejected with the score, counted in
// the Balanced metrics.
func (c *Controller) publishConsolidation(snap *disruption.Snapshot, d *disruption.Decision) {
	nodes := map[string]*disruption.Node{}
	for _, n := range snap.Nodes {
		nodes[n.Name()] = n
	}
	for _, e := range d.Explanations {
		n := nodes[e.Node]
		if n == nil {
			continue
		}
		for _, v := range e.Verdicts {
			if !v.Unconsolidatable {
				continue
			}
			msg := v.Message()
			if n.Node != nil {
				c.events.publishFor(n.Node, corev1.EventTypeNormal, ReasonUnconsolidatable, msg, unconsolidatableDedupe)
			}
			if n.NodeClaim != nil {
				c.events.publishFor(n.NodeClaim, corev1.EventTypeNormal, ReasonUnconsolidatable, msg, unconsolidatableDedupe)
			}
			if v.Kind == disruption.KindBalancedRejected && v.Consolidation != nil && v.Consolidation.Score != nil {
				observeScore(snap.NodePools[v.NodePool], v.Consolidation.Score)
				if n.NodeClaim != nil {
					c.events.normal(n.NodeClaim, ReasonConsolidationRejected, v.Consolidation.Score.Message())
				}
			}
		}
	}
}

// publishApproved announces a started Balanced move: on the NodeClaim for
// one candidate, on the NodePool for several (the score describes the
// move, not one node), with ConsolidationCandidate on each NodeClaim.
func (c *Controller) publishApproved(cmd *disruption.Command) {
	s := cmd.BalancedScore()
	if s == nil || len(cmd.Candidates) == 0 {
		return
	}
	first := cmd.Candidates[0]
	observeScore(first.NodePool, s)
	if len(cmd.Candidates) == 1 {
		c.events.normal(first.NodeClaim, ReasonConsolidationApproved, s.Message())
		return
	}
	c.events.normal(first.NodePool, ReasonConsolidationApproved, s.Message())
	for _, cand := range cmd.Candidates {
		c.events.normal(cand.NodeClaim, ReasonConsolidationCandidate,
			fmt.Sprintf("Part of a consolidation move of %d nodes: %s", len(cmd.Candidates), s.Message()))
	}
}

func observeScore(np *v1.NodePool, s *disruption.BalancedScore) {
	if np == nil {
		return
	}
	decision := "rejected"
	if s.Approved {
		decision = "approved"
	}
	labels := []string{decision, np.Name, string(np.Spec.Disruption.ConsolidationPolicy)}
	metrics.ConsolidationScore.WithLabelValues(labels...).Observe(s.Score)
	metrics.ConsolidationMovesTotal.WithLabelValues(labels...).Inc()
}

// CountTimeout counts a consolidation method that gave up on its timeout,
// in karpenter_voluntary_disruption_consolidation_timeouts_total.
func CountTimeout(consolidationType string) {
	metrics.ConsolidationTimeoutsTotal.WithLabelValues(consolidationType).Inc()
}

// UpstreamStrategy is upstream's consolidation, with its timeouts on clk
// (counted by CountTimeout) and the SpotToSpotConsolidation gate.
func UpstreamStrategy(clk clock.PassiveClock, spotToSpot bool) disruption.Strategy {
	return disruption.NewUpstream(disruption.ConsolidationOptions{SpotToSpot: spotToSpot, Now: clk.Now, OnTimeout: CountTimeout})
}
