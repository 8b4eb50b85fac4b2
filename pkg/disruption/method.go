package disruption

import (
	"sort"
	"time"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Method is one voluntary disruption mechanism. Methods run in order and
// the first one that yields commands acts; consolidation (MultiNode,
// SingleNode) plugs in after Drift.
type Method interface {
	// Reason is the budget reason the method consumes and reports.
	Reason() v1.DisruptionReason
	// Class says whether pods that refuse eviction rule a node out.
	Class() Class
	// ConsolidationType labels metrics ("" for non-consolidation methods).
	ConsolidationType() string
	// ShouldDisrupt filters candidates. A refusal returns false with the
	// verdict to report, or a nil verdict when the node is simply not this
	// method's business (a dynamic pool's node for StaticDrift).
	ShouldDisrupt(snap *Snapshot, c *Candidate) (bool, *Verdict)
	// ComputeCommands picks what to disrupt among the filtered candidates
	// within budgets (Remaining may be decremented: each call gets its own
	// copy), and says why it left the rest.
	ComputeCommands(env *Env, budgets map[string]*BudgetStatus, candidates []*Candidate) ([]*Command, []Verdict, error)
}

// Simulator answers what removing candidates would take: it plans their
// reschedulable pods (with the cluster's pending pods) on the rest of the
// cluster and on new NodeClaims.
type Simulator interface {
	Simulate(candidates []*Candidate, opts SimulationOptions) (*Simulation, error)
}

// SimulationOptions narrow a simulation.
type SimulationOptions struct {
	// Exclude names nodes the candidates' pods may not move to (other pods
	// may): consolidation's destinations still inside their own
	// consolidateAfter window.
	Exclude map[string]bool
	// Types limits new NodeClaims to these instance types per NodePool (a
	// pool it does not name launches nothing); nil leaves every type. Plan
	// validation checks a split against machines of the sizes it launches,
	// not against the one larger machine the plain solver would pack the
	// pods onto.
	Types map[string]map[string]bool
}

// SimulatorFunc adapts a function to Simulator.
type SimulatorFunc func(candidates []*Candidate, opts SimulationOptions) (*Simulation, error)

// Simulate implements Simulator.
func (f SimulatorFunc) Simulate(c []*Candidate, opts SimulationOptions) (*Simulation, error) {
	return f(c, opts)
}

// Simulation is a Simulator's answer.
type Simulation struct {
	// Replacements must be launched before the candidates go.
	Replacements []*scheduling.NewNodeClaim
	// Unschedulable names (namespace/name) the candidates' pods that would
	// fit nowhere; a non-empty list vetoes the command.
	Unschedulable []string
	// Result is the solver's full answer, for the caller to act on.
	Result *scheduling.Result
}

// Env is what methods may consult besides the candidates.
type Env struct {
	Snapshot  *Snapshot
	Simulator Simulator
}

// Command is one disruption to carry out: taint and mark the candidates,
// launch the replacements, wait for them, delete the candidates.
type Command struct {
	Method     Method
	Candidates []*Candidate
	// Replacements are the NodeClaims to launch first (none for a delete).
	Replacements []*scheduling.NewNodeClaim
	// Simulation backs Replacements, when a simulation was run.
	Simulation *Simulation
	// Detail is the method's own account of the command, typed by the
	// strategy that made it: *BalancedScore for a move upstream's
	// consolidation scored under the Balanced policy, *Payback for a move
	// of the repacking planner; nil when there is none.
	Detail any
	// LaunchTaint: the replacements carry LaunchTaint until the command
	// deletes its candidates.
	LaunchTaint bool
}

// BalancedScore is the Balanced score of the move, or nil.
func (c *Command) BalancedScore() *BalancedScore {
	s, _ := c.Detail.(*BalancedScore)
	return s
}

// Payback is the planner's forecast of the move, or nil.
func (c *Command) Payback() *Payback {
	p, _ := c.Detail.(*Payback)
	return p
}

// Payback is what a consolidation move is predicted to save and to cost:
// the price difference over a horizon against the price of restarting the
// evicted pods.
type Payback struct {
	// PriceBefore is what the candidates cost ($/h), PriceAfter what their
	// replacements cost ($/h, worst launch price).
	PriceBefore, PriceAfter float64
	// Horizon is how long the saving is counted for: the planner's horizon,
	// bounded by the candidates' remaining lifetime under expireAfter.
	Horizon time.Duration
	// Saving is (PriceBefore - PriceAfter) over Horizon, in $.
	Saving float64
	// Cost is the evicted pods' disruption cost (EvictionCost, scaled by
	// the remaining lifetime) times the restart cost per pod, in $.
	Cost float64
	// Evictions counts the pods the move evicts.
	Evictions int
}

// Decision is "delete" or "replace", as upstream labels decisions.
func (c *Command) Decision() string {
	if len(c.Replacements) > 0 {
		return "replace"
	}
	return "delete"
}

// DefaultMethods are upstream's methods in upstream's order, consolidation
// last with its default options (no timeouts, SpotToSpotConsolidation off).
func DefaultMethods() []Method {
	return MethodsOf(NewUpstream(ConsolidationOptions{}))
}

// MethodRun is what one method saw in a pass.
type MethodRun struct {
	Reason            v1.DisruptionReason
	ConsolidationType string
	// Eligible counts the candidates that passed ShouldDisrupt.
	Eligible int
	// Commands the method returned (the pass stops at the first method
	// that returns any).
	Commands int
}

// Decision is the outcome of one pass.
type Decision struct {
	// Method is the method that acted, nil when none did.
	Method   Method
	Commands []*Command
	// Groups are Commands by the method that made them, in order: the
	// method that acted, then any Follower of it that found commands too.
	Groups []Group
	// Runs lists the methods evaluated, in order.
	Runs []MethodRun
	// Explanations cover every node the pass looked at and did not put in
	// a command, sorted by node name.
	Explanations []Explanation
	// Warnings are InvalidDoNotDisruptAnnotation verdicts.
	Warnings []Verdict
	// Budgets by reason and NodePool.
	Budgets map[v1.DisruptionReason]map[string]*BudgetStatus
}

// Group is one method's commands in a pass.
type Group struct {
	Method   Method
	Commands []*Command
}

// Disrupt runs one pass: discover candidates, then each method in order
// until one yields commands. sim may be nil when no method needs it
// (drift of non-empty nodes is then reported, not decided).
func Disrupt(snap *Snapshot, methods []Method, sim Simulator) (*Decision, error) {
	return DisruptWith(snap, methods, sim, Hooks{})
}

// Hooks let a caller observe a pass as it runs (to time each method with
// its own clock: the package reads none).
type Hooks struct {
	BeforeMethod func(Method)
	AfterMethod  func(Method, MethodRun)
}

// Follower is a method that, in a pass where an earlier method acted,
// also runs on the fleet that method's commands leave: their nodes count
// as marked for deletion (not candidates, not destinations, and using
// their pools' budgets). The repacking planner follows Emptiness, so that
// its move and the empty nodes' delete wait out one validation delay
// together instead of one pass each. A follower must plan from
// Env.Snapshot: the pass's Simulator does not know the marks.
type Follower interface {
	Follows(m Method) bool
}

// DisruptWith is Disrupt with hooks.
func DisruptWith(snap *Snapshot, methods []Method, sim Simulator, hooks Hooks) (*Decision, error) {
	found := discover(snap)
	d := &Decision{Warnings: found.warnings, Budgets: AllBudgets(snap)}
	verdicts := map[string][]Verdict{}
	for name, v := range found.refused {
		verdicts[name] = append(verdicts[name], v)
	}
	// evaluate runs one method over a pass's candidates and records what
	// it saw; verdicts go to nodes the pass has not put in a command.
	evaluate := func(m Method, snap *Snapshot, found *candidates, budgets map[string]*BudgetStatus) ([]*Command, error) {
		if hooks.BeforeMethod != nil {
			hooks.BeforeMethod(m)
		}
		run := MethodRun{Reason: m.Reason(), ConsolidationType: m.ConsolidationType()}
		var eligible []*Candidate
		for _, c := range found.all {
			if c.PodBlocker != nil && m.Class() != Eventual {
				verdicts[c.Name()] = appendOnce(verdicts[c.Name()], *c.PodBlocker)
				continue
			}
			ok, v := m.ShouldDisrupt(snap, c)
			if !ok {
				if v != nil {
					// appendOnce: both consolidation methods refuse a node
					// for the same reason.
					verdicts[c.Name()] = appendOnce(verdicts[c.Name()], *v)
				}
				continue
			}
			eligible = append(eligible, c)
		}
		run.Eligible = len(eligible)
		var cmds []*Command
		var err error
		if len(eligible) > 0 {
			var vs []Verdict
			cmds, vs, err = m.ComputeCommands(&Env{Snapshot: snap, Simulator: sim}, CloneBudgets(budgets), eligible)
			for _, v := range vs {
				verdicts[v.Node] = appendOnce(verdicts[v.Node], v)
			}
		}
		run.Commands = len(cmds)
		d.Runs = append(d.Runs, run)
		if hooks.AfterMethod != nil {
			hooks.AfterMethod(m, run)
		}
		return cmds, err
	}
	for i, m := range methods {
		cmds, err := evaluate(m, snap, found, d.Budgets[m.Reason()])
		if err != nil {
			return d, err
		}
		if len(cmds) == 0 {
			continue
		}
		d.Method, d.Commands = m, cmds
		d.Groups = append(d.Groups, Group{Method: m, Commands: cmds})
		for _, f := range methods[i+1:] {
			if fl, ok := f.(Follower); !ok || !fl.Follows(m) {
				continue
			}
			left := snap.marking(d.Commands)
			more, err := evaluate(f, left, discover(left), AllBudgets(left)[f.Reason()])
			if err != nil {
				return d, err
			}
			d.Commands = append(d.Commands, more...)
			if len(more) > 0 {
				d.Groups = append(d.Groups, Group{Method: f, Commands: more})
			}
		}
		break
	}
	acted := map[string]bool{}
	for _, cmd := range d.Commands {
		for _, c := range cmd.Candidates {
			acted[c.Name()] = true
		}
	}
	for _, n := range found.looked {
		name := n.Name()
		if acted[name] {
			continue
		}
		d.Explanations = append(d.Explanations, Explanation{Node: name, NodeClaim: n.NodeClaimName(), NodePool: n.NodePool, Verdicts: verdicts[name]})
	}
	sort.Slice(d.Explanations, func(i, j int) bool { return d.Explanations[i].Node < d.Explanations[j].Node })
	return d, nil
}

// marking returns a copy of snap in which the commands' candidates are
// marked for deletion (the nodes themselves are copied, not changed).
func (s *Snapshot) marking(cmds []*Command) *Snapshot {
	marked := map[*Node]bool{}
	for _, cmd := range cmds {
		for _, c := range cmd.Candidates {
			marked[c.Node] = true
		}
	}
	out := *s
	out.Nodes = make([]*Node, len(s.Nodes))
	for i, n := range s.Nodes {
		if marked[n] {
			cp := *n
			cp.MarkedForDeletion = true
			n = &cp
		}
		out.Nodes[i] = n
	}
	return &out
}

// Explain runs a pass over snap with the default methods and returns why
// each node it looked at was left alone. With a nil simulator, drifted
// nodes with pods are reported as needing a simulation.
func Explain(snap *Snapshot, sim Simulator) ([]Explanation, error) {
	d, err := Disrupt(snap, DefaultMethods(), sim)
	if d == nil {
		return nil, err
	}
	return d.Explanations, err
}

func appendOnce(vs []Verdict, v Verdict) []Verdict {
	for _, have := range vs {
		if have.Kind == v.Kind && have.Pod == v.Pod && have.Method == v.Method {
			return vs
		}
	}
	return append(vs, v)
}

// CloneBudgets copies one reason's budgets, so that a trial can take from
// them without touching the originals.
func CloneBudgets(in map[string]*BudgetStatus) map[string]*BudgetStatus {
	out := make(map[string]*BudgetStatus, len(in))
	for k, v := range in {
		c := *v
		out[k] = &c
	}
	return out
}

// budgetVerdict reports a candidate its pool's budget leaves out.
func budgetVerdict(c *Candidate, reason v1.DisruptionReason, b *BudgetStatus) Verdict {
	v := c.verdict(KindBudgetExhausted, reason)
	if b != nil && b.Limiting != nil {
		ref := *b.Limiting
		v.Budget = &ref
	} else if b != nil {
		v.Budget = &BudgetRef{Index: -1, Allowed: b.Allowed, Disrupting: b.Disrupting}
	}
	return v
}

func (c *Candidate) verdict(k Kind, reason v1.DisruptionReason) Verdict {
	return Verdict{Kind: k, Node: c.Name(), NodeClaim: c.NodeClaimName(), NodePool: c.NodePool.Name, Method: reason}
}

// remaining reads a pool's remaining budget (0 for an unknown pool).
func remaining(budgets map[string]*BudgetStatus, pool string) int {
	if b := budgets[pool]; b != nil {
		return b.Remaining
	}
	return 0
}

// driftedSince orders drifted candidates: longest drifted first, then by
// name.
func sortByDrift(cs []*Candidate) {
	since := func(c *Candidate) time.Time {
		if cond := condition(c.NodeClaim, v1.ConditionTypeDrifted); cond != nil {
			return cond.LastTransitionTime.Time
		}
		return time.Time{}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		ti, tj := since(cs[i]), since(cs[j])
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return cs[i].Name() < cs[j].Name()
	})
}
