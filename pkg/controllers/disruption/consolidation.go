package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
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

// ExcludingSimulator is a Simulator that can keep the moved pods off some
// nodes while pending pods may still use them.
type ExcludingSimulator interface {
	SimulateExcluding(ctx context.Context, remove, exclude map[string]bool) (*Simulated, error)
}

// SimulateExcluding implements ExcludingSimulator: the excluded nodes get
// a taint that only the moved pods do not tolerate, so consolidation does
// not pile pods onto nodes that just had churn (upstream's rule for
// destinations inside their own consolidateAfter window).
func (s SnapshotSimulator) SimulateExcluding(ctx context.Context, remove, exclude map[string]bool) (*Simulated, error) {
	snap, err := s.Builder.Build(ctx, snapshot.Request{Remove: remove})
	if err != nil {
		return nil, fmt.Errorf("building the simulation snapshot: %w", err)
	}
	in := snap.Input
	if len(exclude) > 0 {
		excludeDestinations(in, snap.Moved, exclude)
	}
	return &Simulated{Input: in, Result: scheduling.Solve(in), NodePools: snap.NodePools, Moved: snap.Moved}, nil
}

func excludeDestinations(in *scheduling.Input, moved []*corev1.Pod, exclude map[string]bool) {
	taint := disruption.ExcludedDestinationTaint()
	nodes := make([]*scheduling.ExistingNode, len(in.Nodes))
	for i, n := range in.Nodes {
		if !exclude[n.Name] && (n.NodeClaim == "" || !exclude[n.NodeClaim]) {
			nodes[i] = n
			continue
		}
		cp := *n
		cp.Taints = append(append([]corev1.Taint(nil), n.Taints...), taint)
		nodes[i] = &cp
	}
	in.Nodes = nodes
	isMoved := map[types.UID]bool{}
	for _, p := range moved {
		isMoved[p.UID] = true
	}
	pods := make([]*corev1.Pod, len(in.Pods))
	for i, p := range in.Pods {
		if isMoved[p.UID] {
			pods[i] = p
			continue
		}
		cp := *p
		cp.Spec.Tolerations = append(append([]corev1.Toleration(nil), p.Spec.Tolerations...),
			corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: taint.Effect})
		pods[i] = &cp
	}
	in.Pods = pods
}

// passSimulator adapts the controller's Simulator for one pass: it
// removes the candidates, and refuses plans that leave one of their pods
// unplaced or put one on a Karpenter node that is still starting (it
// might never come up) or on an excluded destination. Only new NodeClaims
// that take a moved pod are replacements; pending pods are provisioning's
// business.
type passSimulator struct {
	ctx context.Context
	sim Simulator
}

func removal(cands []*disruption.Candidate) map[string]bool {
	remove := map[string]bool{}
	for _, cand := range cands {
		remove[cand.Name()] = true
	}
	return remove
}

// Simulate implements disruption.Simulator.
func (p *passSimulator) Simulate(cands []*disruption.Candidate) (*disruption.Simulation, error) {
	sim, err := p.sim.Simulate(p.ctx, removal(cands))
	if err != nil {
		return nil, err
	}
	return interpret(sim), nil
}

// SimulateExcluding implements disruption.ExcludingSimulator. A simulator
// that cannot exclude is asked plainly; the pure package then rejects
// plans that use an excluded node.
func (p *passSimulator) SimulateExcluding(cands []*disruption.Candidate, exclude map[string]bool) (*disruption.Simulation, error) {
	es, ok := p.sim.(ExcludingSimulator)
	if !ok {
		return p.Simulate(cands)
	}
	sim, err := es.SimulateExcluding(p.ctx, removal(cands), exclude)
	if err != nil {
		return nil, err
	}
	in := sim.Input
	if in == nil {
		in = &scheduling.Input{}
	}
	return disruption.InterpretSimulation(in, sim.Result, sim.Moved, exclude), nil
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
	s := cmd.Score
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

// UpstreamMethods are upstream's methods in upstream's order, with the
// consolidation timeouts on clk (counted in
// karpenter_voluntary_disruption_consolidation_timeouts_total) and the
// SpotToSpotConsolidation gate. A different consolidation algorithm is a
// different methods list.
func UpstreamMethods(clk clock.PassiveClock, spotToSpot bool) []disruption.Method {
	opts := disruption.ConsolidationOptions{
		SpotToSpot: spotToSpot,
		Now:        clk.Now,
		OnTimeout: func(ctype string) {
			metrics.ConsolidationTimeoutsTotal.WithLabelValues(ctype).Inc()
		},
	}
	return append([]disruption.Method{disruption.Emptiness{}, disruption.StaticDrift{}, disruption.Drift{}}, disruption.ConsolidationMethods(opts)...)
}
