package disruption

import (
	"time"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Strategy is one consolidation algorithm (the --consolidation-algorithm
// flag): upstream's multi- and single-node consolidation (Upstream), or the
// repacking planner (pkg/disruption/repack). A pass runs Emptiness,
// StaticDrift and Drift, then the strategy's methods (MethodsOf). The
// disruption controller validates their commands through the strategy after
// the validation delay, keeps the marks the strategy asks for on nodes, and
// tells it which commands started; it never names a strategy itself.
type Strategy interface {
	// Methods are the strategy's consolidation methods, in the order they
	// run. Their reason is Underutilized.
	Methods() []Method
	// ReadsPending reports whether the methods read Snapshot.Pending. The
	// controller then lists the pending pods every pass, holds a node for
	// a nomination only while pods are pending, and ends a validation
	// delay early once no command's candidates are all still valid.
	ReadsPending() bool
	// Validate checks commands of the strategy's methods against fresh
	// state after the validation delay, and returns those still to start
	// (with fresh candidates) and those it abandons, with why.
	Validate(state FreshState, cmds []*Command) ([]*Command, []Abandoned, error)
	// Drain names the nodes that should carry DrainTaint now, and whose
	// ReplicaSet pods DrainDeletionCost (nil: none), given the pass's
	// commands that wait out the validation delay. Every other node is
	// cleared of both.
	Drain(validating []*Command) []string
	// Started is told the commands of the strategy's methods that started
	// at now, with the names of the NodeClaims each launched (launched[i]
	// for cmds[i]).
	Started(now time.Time, cmds []*Command, launched [][]string)
}

// FreshState is the cluster as it is when a command is validated: each
// Snapshot call reads it again, and Simulator simulates over it.
type FreshState interface {
	Snapshot() (*Snapshot, error)
	Simulator() Simulator
}

// Abandoned is a command validation dropped, and why (a ValidationError).
type Abandoned struct {
	Command *Command
	Err     error
}

// NonConsolidationMethods are upstream's methods every strategy runs first,
// in upstream's order: Emptiness, StaticDrift, Drift.
func NonConsolidationMethods() []Method {
	return []Method{Emptiness{}, StaticDrift{}, Drift{}}
}

// MethodsOf is a pass's methods under s: NonConsolidationMethods, then the
// strategy's.
func MethodsOf(s Strategy) []Method {
	return append(NonConsolidationMethods(), s.Methods()...)
}

// IsConsolidation reports whether m is a strategy's method (reason
// Underutilized) rather than one every strategy shares.
func IsConsolidation(m Method) bool {
	return m.Reason() == v1.DisruptionReasonUnderutilized
}

// Validated reports whether m's commands wait out the validation delay and
// are checked again (consolidation and Emptiness; not drift).
func Validated(m Method) bool {
	return m.ConsolidationType() != ""
}

// Validate checks the commands of one method m after the validation delay:
// a strategy's through the strategy, Emptiness's by deciding again on fresh
// state and keeping the candidates still picked (upstream's rule, so that
// pods the kube-scheduler just bound there are not evicted). Methods that
// are not Validated keep their commands.
func Validate(state FreshState, s Strategy, m Method, cmds []*Command) ([]*Command, []Abandoned, error) {
	switch {
	case IsConsolidation(m):
		return s.Validate(state, cmds)
	case Validated(m):
		return redecide(state, m, cmds)
	}
	return cmds, nil, nil
}

// redecide runs m again on fresh state and keeps, of each command, the
// candidates m still picks; a command left with none is abandoned.
func redecide(state FreshState, m Method, cmds []*Command) ([]*Command, []Abandoned, error) {
	snap, err := state.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	again, err := Disrupt(snap, []Method{m}, state.Simulator())
	if err != nil {
		return nil, nil, err
	}
	still := map[string]*Candidate{}
	for _, cmd := range again.Commands {
		for _, c := range cmd.Candidates {
			still[c.Name()] = c
		}
	}
	var kept []*Command
	var dropped []Abandoned
	for _, cmd := range cmds {
		cp := *cmd
		cp.Candidates = nil
		for _, c := range cmd.Candidates {
			if fresh, ok := still[c.Name()]; ok {
				cp.Candidates = append(cp.Candidates, fresh)
			}
		}
		if len(cp.Candidates) == 0 {
			dropped = append(dropped, Abandoned{Command: cmd, Err: invalid("no candidate is still valid")})
			continue
		}
		kept = append(kept, &cp)
	}
	return kept, dropped, nil
}

// AnyStillValid reports whether some command still has every candidate
// valid (eligible for its method and within budget) on snap.
func AnyStillValid(snap *Snapshot, cmds []*Command) bool {
	for _, cmd := range cmds {
		if _, err := ValidateCandidates(snap, cmd); err == nil {
			return true
		}
	}
	return false
}

// Upstream is upstream's consolidation: multi-node, then single-node
// consolidation, each command validated by upstream's rule one at a time.
type Upstream struct {
	methods []Method
}

// NewUpstream returns upstream's strategy with opts (the zero value is
// upstream's default without timeouts).
func NewUpstream(opts ConsolidationOptions) *Upstream {
	return &Upstream{methods: ConsolidationMethods(opts)}
}

// Methods implements Strategy.
func (u *Upstream) Methods() []Method { return u.methods }

// ReadsPending implements Strategy: upstream's simulations find the
// pending pods themselves (the snapshot builder lists them), so a pass need
// not list every pod.
func (u *Upstream) ReadsPending() bool { return false }

// Drain implements Strategy: upstream drains nothing ahead of a command.
func (u *Upstream) Drain([]*Command) []string { return nil }

// Started implements Strategy: upstream keeps no history.
func (u *Upstream) Started(time.Time, []*Command, [][]string) {}

// Validate implements Strategy with upstream's rule, command by command:
// every candidate still eligible, not nominated and within budget; a fresh
// simulation still places every pod, wants a replacement exactly when the
// command has one, and offers every type the command would launch; then
// the candidates once more on a fresher snapshot (pods may have landed
// meanwhile).
func (u *Upstream) Validate(state FreshState, cmds []*Command) ([]*Command, []Abandoned, error) {
	var kept []*Command
	var dropped []Abandoned
	for _, cmd := range cmds {
		fresh, err := u.validateOne(state, cmd)
		if err != nil {
			if !IsValidationError(err) {
				return nil, nil, err
			}
			dropped = append(dropped, Abandoned{Command: cmd, Err: err})
			continue
		}
		cmd.Candidates = fresh
		kept = append(kept, cmd)
	}
	return kept, dropped, nil
}

func (u *Upstream) validateOne(state FreshState, cmd *Command) ([]*Candidate, error) {
	snap, err := state.Snapshot()
	if err != nil {
		return nil, err
	}
	fresh, err := ValidateCandidates(snap, cmd)
	if err != nil {
		return nil, err
	}
	if err := ValidateCommand(snap, cmd, fresh, state.Simulator()); err != nil {
		return nil, err
	}
	if snap, err = state.Snapshot(); err != nil {
		return nil, err
	}
	return ValidateCandidates(snap, &Command{Method: cmd.Method, Candidates: fresh})
}
