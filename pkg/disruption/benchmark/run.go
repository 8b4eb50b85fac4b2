package benchmark

import (
	"fmt"
	"strings"
	"time"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// Algorithm is one consolidation strategy under test, with the simulator
// its passes use.
type Algorithm struct {
	Name     string
	Strategy disruption.Strategy
	// Simulator returns the simulator for a pass (nil when unused).
	Simulator func(snap *disruption.Snapshot) disruption.Simulator
}

// Planner is the repacking planner, with its history kept across passes.
func Planner(name string, opts repack.Options) Algorithm {
	return Algorithm{Name: name, Strategy: repack.NewStrategy(opts)}
}

// Upstream is upstream's consolidation with spot-to-spot on, its 1 and 3
// minute timeouts on the wall clock, and the solver-backed simulator
// (Robust, and reading each pass's snapshot once, as the controller's).
func Upstream() Algorithm {
	return Algorithm{
		Name:     "upstream",
		Strategy: disruption.NewUpstream(disruption.ConsolidationOptions{SpotToSpot: true, Now: time.Now}),
		Simulator: func(snap *disruption.Snapshot) disruption.Simulator {
			snap.DaemonSets = daemonSetsOf(snap)
			return disruption.SolverSimulator{View: snapshot.Memo(snap.View()), Request: snapshot.Request{Options: snapshot.Options{Solver: scheduling.Options{Robust: true}}}}
		},
	}
}

// executed tells the strategy which of a pass's commands (all carried out)
// are its own, as the controller does when they start.
func (a Algorithm) executed(now time.Time, cmds []*disruption.Command, launched [][]string) {
	var mine []*disruption.Command
	var names [][]string
	for i, cmd := range cmds {
		if disruption.IsConsolidation(cmd.Method) {
			mine = append(mine, cmd)
			names = append(names, launched[i])
		}
	}
	a.Strategy.Started(now, mine, names)
}

// Result is one algorithm's run over one cluster.
type Result struct {
	Algorithm               string
	NodesBefore, NodesAfter int
	PriceBefore, PriceAfter float64
	// Bound is Cluster.Bound after the run (the pods do not change).
	Bound     float64
	Commands  int
	Evictions int
	// Fresh counts evicted pods that needed a newly provisioned node.
	Fresh  int
	Passes int
	// FirstPass is the first consolidation pass's time; Total all passes'.
	FirstPass, Total time.Duration
	// Capped: the run stopped at the pass cap with commands still coming.
	Capped bool
}

// Ratio is PriceAfter over Bound.
func (r Result) Ratio() float64 { return r.PriceAfter / r.Bound }

// Consolidate runs passes of alg over c until a pass finds no command or
// maxPasses (0: unlimited) passes ran, carrying each pass's commands out.
func Consolidate(c *Cluster, alg Algorithm, maxPasses int) (Result, error) {
	r := Result{Algorithm: alg.Name, NodesBefore: len(c.Snap.Nodes), PriceBefore: c.Price()}
	ev0, fr0, cm0 := c.Evictions, c.Fresh, c.Commands
	methods := disruption.MethodsOf(alg.Strategy)
	for maxPasses <= 0 || r.Passes < maxPasses {
		var sim disruption.Simulator
		if alg.Simulator != nil {
			sim = alg.Simulator(c.Snap)
		}
		start := time.Now()
		d, err := disruption.Disrupt(c.Snap, methods, sim)
		took := time.Since(start)
		if err != nil {
			return r, fmt.Errorf("%s pass %d: %w", alg.Name, r.Passes+1, err)
		}
		c.applyDrain(alg)
		r.Passes++
		r.Total += took
		if r.Passes == 1 {
			r.FirstPass = took
		}
		if len(d.Commands) == 0 {
			break
		}
		launched, err := c.Execute(d.Commands, c.Snap.Now)
		if err != nil {
			return r, fmt.Errorf("%s pass %d: %w", alg.Name, r.Passes, err)
		}
		alg.executed(c.Snap.Now, d.Commands, launched)
		c.sortNodes()
		if maxPasses > 0 && r.Passes == maxPasses {
			r.Capped = true
		}
	}
	r.NodesAfter, r.PriceAfter, r.Bound = len(c.Snap.Nodes), c.Price(), c.Bound()
	r.Evictions, r.Fresh, r.Commands = c.Evictions-ev0, c.Fresh-fr0, c.Commands-cm0
	return r, nil
}

// Table renders results as a fixed-width table.
func Table(rs []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %7s %7s %10s %10s %10s %6s %8s %9s %6s %6s %11s %11s\n",
		"algorithm", "nodes0", "nodes1", "$/h before", "$/h after", "bound", "ratio", "commands", "evictions", "fresh", "passes", "first pass", "all passes")
	for _, r := range rs {
		capped := ""
		if r.Capped {
			capped = " (capped)"
		}
		fmt.Fprintf(&b, "%-10s %7d %7d %10.2f %10.2f %10.2f %6.3f %8d %9d %6d %6d %11s %11s%s\n",
			r.Algorithm, r.NodesBefore, r.NodesAfter, r.PriceBefore, r.PriceAfter, r.Bound, r.Ratio(), r.Commands, r.Evictions, r.Fresh, r.Passes,
			r.FirstPass.Round(time.Millisecond), r.Total.Round(time.Millisecond), capped)
	}
	return b.String()
}
