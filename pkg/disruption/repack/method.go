package repack

import (
	"time"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// ConsolidationType is the planner's consolidation_type metric label.
const ConsolidationType = "repack"

// Planner is the repacking planner as a disruption.Method (reason
// Underutilized). It takes the candidates upstream's consolidation would
// (same preconditions) and returns every move of its plan at once.
type Planner struct {
	Options Options
	// History returns the recent moves at now (nil: none). The disruption
	// controller passes its Recorder's.
	History func(now time.Time) History
	// Recorder, when set, is told the commands the caller starts (Started),
	// so that the next pass sees them in History. Commands are recorded
	// when they start, not when they are planned: a plan the 15 s
	// validation abandons evicted nothing, and recording it would keep
	// its nodes' pods out of the next plans for the cool-down, leaving
	// those plans only the nodes it did not pick (often full ones).
	Recorder *Recorder
	// Drained, when set, is told each plan's Drain.
	Drained func(names []string)
}

func (Planner) Reason() v1.DisruptionReason { return v1.DisruptionReasonUnderutilized }
func (Planner) Class() disruption.Class     { return disruption.Graceful }
func (Planner) ConsolidationType() string   { return ConsolidationType }

// ShouldDisrupt applies upstream's consolidation preconditions.
func (Planner) ShouldDisrupt(snap *disruption.Snapshot, c *disruption.Candidate) (bool, *disruption.Verdict) {
	return disruption.MultiNodeConsolidation{}.ShouldDisrupt(snap, c)
}

// ComputeCommands implements disruption.Method.
func (p Planner) ComputeCommands(env *disruption.Env, budgets map[string]*disruption.BudgetStatus, cs []*disruption.Candidate) ([]*disruption.Command, []disruption.Verdict, error) {
	var hist History
	switch {
	case p.History != nil:
		hist = p.History(env.Snapshot.Now)
	case p.Recorder != nil:
		hist = p.Recorder.History(env.Snapshot.Now)
	}
	plan, err := Compute(env.Snapshot, cs, budgets, hist, p.Options)
	if err != nil {
		return nil, nil, err
	}
	for _, cmd := range plan.Commands {
		cmd.Method = p
	}
	if p.Drained != nil {
		p.Drained(plan.Drain)
	}
	return plan.Commands, plan.Verdicts, nil
}

// Follows implements disruption.Follower: in a pass where Emptiness acts,
// the planner plans for the nodes that remain, so that its move waits out
// the validation delay beside the empty nodes' delete rather than in the
// next pass (15 s sooner).
func (Planner) Follows(m disruption.Method) bool {
	_, empty := m.(disruption.Emptiness)
	return empty
}

// Explain plans a pass over snap with the planner and returns why each
// node it looked at was left alone (for a CLI), with the commands it
// would start.
func Explain(snap *disruption.Snapshot, hist History, opts Options) (*disruption.Decision, error) {
	p := Planner{Options: opts, History: func(time.Time) History { return hist }}
	return disruption.Disrupt(snap, append(disruption.NonConsolidationMethods(), p), nil)
}

// Algorithm values of --consolidation-algorithm.
const (
	AlgorithmUpstream = "upstream"
	AlgorithmPlanner  = "planner"
)

// Strategy is the planner as a disruption.Strategy: its one method in
// place of upstream's multi- and single-node consolidation, its plans
// validated together (ValidatePlan) and again by planning on fresh state,
// the nodes its last plan drains, and the history of the moves that
// started, which its cool-down reads.
type Strategy struct {
	planner  Planner
	recorder *Recorder
}

// NewStrategy returns the planner with opts and a history of its own.
func NewStrategy(opts Options) *Strategy {
	rec := NewRecorder(opts.withDefaults().CoolDown)
	return &Strategy{planner: Planner{Options: opts, Recorder: rec, Drained: rec.SetDrain}, recorder: rec}
}

// Methods implements disruption.Strategy.
func (s *Strategy) Methods() []disruption.Method { return []disruption.Method{s.planner} }

// ReadsPending implements disruption.Strategy: the plan leaves room for
// pending pods.
func (s *Strategy) ReadsPending() bool { return true }

// Drain implements disruption.Strategy: the last plan's Drain, and the
// candidates of the commands waiting out the validation delay. A
// candidate carries no disruption taint before its command starts, and an
// empty one is the emptiest node there is: the kube-scheduler, which
// prefers the emptiest, would put the pods the previous pass's commands
// evicted on the empty nodes Emptiness is validating. Emptiness then drops
// them, and since those pods replace evicted ones, the cool-down freezes
// the nodes.
func (s *Strategy) Drain(validating []*disruption.Command) []string {
	out := s.recorder.Drain()
	for _, cmd := range validating {
		for _, c := range cmd.Candidates {
			out = append(out, c.Name())
		}
	}
	return out
}

// Started implements disruption.Strategy: the commands that started go
// into the history, with the NodeClaims they launched, so that the
// cool-down leaves those nodes and pods alone.
func (s *Strategy) Started(now time.Time, cmds []*disruption.Command, launched [][]string) {
	s.planner.Started(now, cmds, launched)
}

// Started records commands of this planner that the caller started at
// now, with the names of the NodeClaims each launched (launched[i] for
// cmds[i]), in the Recorder (if any): the cool-down leaves those nodes
// alone.
func (p Planner) Started(now time.Time, cmds []*disruption.Command, launched [][]string) {
	if p.Recorder != nil && len(cmds) > 0 {
		p.Recorder.Record(now, cmds, launched)
	}
}
