package repack

import (
	"time"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Defaults of Options.
const (
	// DefaultHorizon is how long a move's saving is counted for.
	DefaultHorizon = time.Hour
	// DefaultRestartCost is the price, in dollars, of restarting one pod of
	// eviction cost 1 (a default pod, see disruption.EvictionCost). 0.9 ¢
	// is about twenty minutes of a 2 vCPU on-demand node: a pod's start
	// (image pull, warm-up, readiness) plus the risk of a disruption. With
	// the 1 h horizon a move then has to save 0.9 ¢/h per evicted pod. A
	// lower cost takes moves the next scale-up undoes; a higher one keeps
	// nodes the cheapest fleet would not. docs/consolidation.md has the
	// churn figures behind the value (BenchmarkChurnRestartCost).
	DefaultRestartCost = 0.009
	// DefaultCoolDown is how long a node a move launched is left alone, and
	// how long a pod a move evicted is not evicted again: the scale-down
	// stabilization window of the HorizontalPodAutoscaler, within which a
	// scale-down that follows an eviction is taken as noise. A longer one
	// holds every node that received an evicted pod, so that the next
	// scale-in cannot repack it: fewer evictions for a dearer fleet.
	DefaultCoolDown = 5 * time.Minute
	// DefaultGroupSize is how many underused nodes an N→M move considers
	// together.
	DefaultGroupSize = 100
	// DefaultSplitSaving is the share of a node's price a split (one node
	// into several smaller ones) must save.
	DefaultSplitSaving = 0.2
)

// Options configure the planner. The zero value is the default planner.
type Options struct {
	// Horizon over which a move's saving is counted (DefaultHorizon),
	// bounded by the candidates' remaining lifetime under expireAfter.
	Horizon time.Duration
	// RestartCost is $ per unit of disruption cost (DefaultRestartCost).
	RestartCost float64
	// CoolDown (DefaultCoolDown) protects the nodes recent moves launched
	// and the pods recent moves evicted.
	CoolDown time.Duration
	// TakeAnySaving drops the payback gate (any saving is taken) and the
	// cool-down: the "take any saving" baseline of the benchmarks.
	TakeAnySaving bool
	// SpotToSpot is the SpotToSpotConsolidation feature gate: without it a
	// spot node is deleted but never replaced by spot capacity.
	SpotToSpot bool
	// GroupSize of N→M moves (DefaultGroupSize); 1 disables them.
	GroupSize int
	// KeepEfficiency, when set, replaces the keep rule (see worker.kept)
	// by a constant: the nodes at least this efficient (their pods'
	// cheapest conceivable price over theirs) are kept, the others
	// repacked. Unset, the payback gate's own rule decides which nodes are
	// kept, so the threshold follows from RestartCost and Horizon. The
	// benchmarks set it to compare the rule with the swept constant 0.88
	// it replaced.
	KeepEfficiency float64
	// NoSplit disables splitting one node into smaller ones.
	NoSplit bool
	// SplitSaving (DefaultSplitSaving) is the share of the node's price a
	// split must save; a smaller saving is left to single replacements.
	SplitSaving float64
	// Parallelism bounds the goroutines (0: GOMAXPROCS).
	Parallelism int
	// Solver options; Robust is always set.
	Solver scheduling.Options
	// WellKnownLabels and Unavailable are passed to the solver as
	// provisioning passes them.
	WellKnownLabels []string
	Unavailable     []scheduling.OfferingKey
}

func (o Options) withDefaults() Options {
	if o.Horizon <= 0 {
		o.Horizon = DefaultHorizon
	}
	if o.RestartCost <= 0 {
		o.RestartCost = DefaultRestartCost
	}
	if o.CoolDown <= 0 {
		o.CoolDown = DefaultCoolDown
	}
	if o.SplitSaving <= 0 {
		o.SplitSaving = DefaultSplitSaving
	}
	if o.GroupSize <= 0 {
		o.GroupSize = DefaultGroupSize
	}
	o.Solver.Robust = true
	return o
}
