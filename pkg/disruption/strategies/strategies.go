// Package strategies registers the consolidation strategies by the name
// --consolidation-algorithm gives them: "upstream" (upstream's multi- and
// single-node consolidation) and "planner" (the repacking planner). It is
// the one place that names each strategy's package; the controller, the CLI
// and the benchmarks ask it for a disruption.Strategy.
package strategies

import (
	"fmt"
	"time"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

// Names of the strategies, the values of --consolidation-algorithm.
const (
	Upstream = "upstream"
	Planner  = "planner"
)

// Names lists the strategies, the default first.
func Names() []string { return []string{Upstream, Planner} }

// Options configure a strategy; each reads the fields that concern it.
type Options struct {
	// Algorithm names the strategy (Upstream when empty).
	Algorithm string
	// SpotToSpot is the SpotToSpotConsolidation feature gate.
	SpotToSpot bool
	// Now reads the caller's clock for upstream's timeouts (nil: none),
	// and OnTimeout is told of each, with the consolidation type.
	Now       func() time.Time
	OnTimeout func(consolidationType string)
	// Horizon, RestartCost and CoolDown are the planner's payback horizon,
	// dollars per unit of eviction cost and cool-down (zero: its defaults).
	Horizon     time.Duration
	RestartCost float64
	CoolDown    time.Duration
	// WellKnownLabels are the provider's label keys, for the planner's own
	// solves.
	WellKnownLabels []string
}

// New returns the strategy opts.Algorithm names.
func New(opts Options) (disruption.Strategy, error) {
	switch opts.Algorithm {
	case Upstream, "":
		return disruption.NewUpstream(disruption.ConsolidationOptions{SpotToSpot: opts.SpotToSpot, Now: opts.Now, OnTimeout: opts.OnTimeout}), nil
	case Planner:
		return repack.NewStrategy(repack.Options{SpotToSpot: opts.SpotToSpot, WellKnownLabels: opts.WellKnownLabels,
			Horizon: opts.Horizon, RestartCost: opts.RestartCost, CoolDown: opts.CoolDown}), nil
	}
	return nil, fmt.Errorf("unknown consolidation algorithm %q (one of %q)", opts.Algorithm, Names())
}
