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
	// those plans only the nodes it did not pick (in the end-to-end
	// benchmark, full nodes).
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

// ReadsPending implements disruption.PendingReader: the plan leaves room
// for pending pods.
func (Planner) ReadsPending() bool { return true }

// Started records commands of this planner that the caller started at
// now, with the names of the NodeClaims each launched (launched[i] for
// cmds[i]), in the Recorder (if any): the cool-down leaves those nodes
// alone.
func (p Planner) Started(now time.Time, cmds []*disruption.Command, launched [][]string) {
	if p.Recorder != nil && len(cmds) > 0 {
		p.Recorder.Record(now, cmds, launched)
	}
}

// Methods are upstream's non-consolidation methods in upstream's order
// (Emptiness, StaticDrift, Drift), then the planner in place of multi- and
// single-node consolidation.
func Methods(p Planner) []disruption.Method {
	return []disruption.Method{disruption.Emptiness{}, disruption.StaticDrift{}, disruption.Drift{}, p}
}

// Explain plans a pass over snap with the planner and returns why each
// node it looked at was left alone (for a CLI), with the commands it
// would start.
func Explain(snap *disruption.Snapshot, hist History, opts Options) (*disruption.Decision, error) {
	return disruption.Disrupt(snap, Methods(Planner{Options: opts, History: func(time.Time) History { return hist }}), nil)
}

// Algorithm values of --consolidation-algorithm.
const (
	AlgorithmUpstream = "upstream"
	AlgorithmPlanner  = "planner"
)

// Select returns upstream unchanged unless algorithm is "planner", in
// which case upstream's Emptiness and non-consolidation methods are
// followed by the planner (with its own Recorder) instead of upstream's
// multi- and single-node consolidation.
func Select(algorithm string, upstream []disruption.Method, opts Options) []disruption.Method {
	if algorithm != AlgorithmPlanner {
		return upstream
	}
	// Emptiness stays: the planner, like upstream's consolidation, leaves
	// empty nodes to it (they carry consolidation type "empty" but are
	// not what the planner replaces).
	var out []disruption.Method
	for _, m := range upstream {
		if _, empty := m.(disruption.Emptiness); empty || m.ConsolidationType() == "" {
			out = append(out, m)
		}
	}
	rec := NewRecorder(opts.withDefaults().CoolDown)
	return append(out, Planner{Options: opts, Recorder: rec, Drained: rec.SetDrain})
}

// Drain returns the names of the nodes the planner Select put among
// methods wants DrainTaint on (the last plan's, which its Recorder keeps),
// or nil when methods have no such planner: then no node should carry the
// taint.
func Drain(methods []disruption.Method) func() []string {
	for _, m := range methods {
		if p, ok := m.(Planner); ok && p.Recorder != nil {
			return p.Recorder.Drain
		}
	}
	return nil
}
