package benchmark

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

// upstreamPasses caps upstream's passes per cluster size: each of its
// passes takes one command, and a pass at 1,000 nodes and more runs into
// its 1 and 3 minute timeouts. BENCH_UPSTREAM_FULL=1 lifts the caps.
func upstreamPasses(nodes int) int {
	if os.Getenv("BENCH_UPSTREAM_FULL") != "" {
		return 0
	}
	switch {
	case nodes <= 100:
		return 0
	case nodes <= 1000:
		return 3
	default:
		return 1
	}
}

// BenchmarkConsolidation consolidates the synthetic clusters (100, 1,000
// and 5,000 nodes of 10 pods after a 30% scale-in) with the planner and
// with upstream's methods, and reports the first pass's time, $/h before
// and after, evictions, pods that needed a fresh node and $/h after over
// the LP bound. Targets: planner pass at 5,000 nodes ≤ 30 s, ratio ≤ 1.10.
//
//	go test -run '^$' -bench BenchmarkConsolidation -benchtime 1x ./pkg/disruption/benchmark/
func BenchmarkConsolidation(b *testing.B) {
	for _, nodes := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for b.Loop() {
				var rs []Result
				for _, alg := range []Algorithm{Planner("planner", repack.Options{SpotToSpot: true}), Upstream()} {
					c, err := NewCluster(nodes, 0.3, 1)
					if err != nil {
						b.Fatal(err)
					}
					passes := 0
					if alg.Name == "upstream" {
						passes = upstreamPasses(nodes)
					}
					r, err := Consolidate(c, alg, passes)
					if err != nil {
						b.Fatal(err)
					}
					rs = append(rs, r)
					b.ReportMetric(r.FirstPass.Seconds(), alg.Name+"-pass-s")
					b.ReportMetric(r.PriceAfter, alg.Name+"-$/h-after")
					b.ReportMetric(r.Ratio(), alg.Name+"-ratio")
					b.ReportMetric(float64(r.Evictions), alg.Name+"-evictions")
					b.ReportMetric(float64(r.Fresh), alg.Name+"-fresh")
				}
				b.Log("\n" + Table(rs))
			}
		})
	}
}

// BenchmarkChurn replays a 6-hour trace (a step every 5 minutes) on a
// 100-node cluster for the planner, upstream's algorithm and "take any
// saving" (the planner without payback gate and cool-down), and reports
// evictions per hour and the mean $/h, for eight trace seeds (one
// sub-benchmark each; seed 7 is the one reported first). Target: the
// planner at most half upstream's evictions, at a $/h at most 2% above
// the best of the three. One seed's figures move by a few percent with
// any change to the planner's choices (the trace is chaotic), so compare
// means over the seeds.
//
//	go test -run '^$' -bench BenchmarkChurn -benchtime 1x ./pkg/disruption/benchmark/
//	go test -run '^$' -bench 'BenchmarkChurn/seed=7$' -benchtime 1x ./pkg/disruption/benchmark/
func BenchmarkChurn(b *testing.B) {
	for _, seed := range churnSeeds {
		b.Run(fmt.Sprintf("seed=%d", seed), func(b *testing.B) {
			for b.Loop() {
				var rs []ChurnResult
				for _, alg := range []Algorithm{
					Planner("planner", repack.Options{SpotToSpot: true}),
					Upstream(),
					Planner("take-any-saving", repack.Options{SpotToSpot: true, TakeAnySaving: true}),
				} {
					r, err := replayChurn(alg, seed)
					if err != nil {
						b.Fatal(err)
					}
					rs = append(rs, r)
					b.ReportMetric(r.EvictionsPerHour(), r.Algorithm+"-evictions/h")
					b.ReportMetric(r.MeanPrice, r.Algorithm+"-$/h")
					b.ReportMetric(float64(r.Fresh), r.Algorithm+"-fresh")
				}
				b.Log("\n" + ChurnTable(rs))
			}
		})
	}
}

// BenchmarkScaleIn consolidates, with the planner and with upstream's
// methods, fleets the end-to-end benchmark's 16-vCPU-capped runs found
// after their scale-in (ScaleInCapped16, ScaleInCapped16Holes,
// ScaleInCapped16Threes, ScaleInCapped16Ones), and
// reports evictions, $/h after and $/h after over PodFloor for the 500
// large pods, the cheapest any fleet could be. The end-to-end run's
// kube-scheduler, timings and repeated passes are not here; this is the
// same starting state, offline.
//
//	go test -run '^$' -bench BenchmarkScaleIn -benchtime 1x ./pkg/disruption/benchmark/
func BenchmarkScaleIn(b *testing.B) {
	for _, f := range []struct {
		name  string
		fleet [][3]int
	}{{"fleet=run1", ScaleInCapped16}, {"fleet=holes", ScaleInCapped16Holes}, {"fleet=threes", ScaleInCapped16Threes}, {"fleet=ones", ScaleInCapped16Ones}, {"fleet=twos", ScaleInCapped16Twos}} {
		b.Run(f.name, func(b *testing.B) { benchScaleIn(b, f.fleet) })
	}
}

func benchScaleIn(b *testing.B, fleet [][3]int) {
	for b.Loop() {
		var rs []Result
		floor, err := LargePodFloor(500, true)
		if err != nil {
			b.Fatal(err)
		}
		for _, alg := range []Algorithm{Planner("planner", repack.Options{}), Upstream()} {
			c, err := NewScaleInCluster(fleet)
			if err != nil {
				b.Fatal(err)
			}
			r, err := Consolidate(c, alg, 0)
			if err != nil {
				b.Fatal(err)
			}
			r.Bound = floor
			rs = append(rs, r)
			b.ReportMetric(r.PriceAfter, alg.Name+"-$/h-after")
			b.ReportMetric(r.Ratio(), alg.Name+"-ratio")
			b.ReportMetric(float64(r.Evictions), alg.Name+"-evictions")
			b.ReportMetric(float64(r.Fresh), alg.Name+"-fresh")
		}
		b.Log("\n" + Table(rs))
	}
}

// churnSeeds are BenchmarkChurn's trace seeds.
var churnSeeds = []int64{7, 11, 23, 3, 5, 13, 17, 29}

// replayChurn is the churn benchmarks' replay: 6 hours on 100 nodes, a
// step every 5 minutes, at most 10 consolidation passes per step.
func replayChurn(alg Algorithm, seed int64) (ChurnResult, error) {
	return Churn(alg, 100, seed, 6, 5*time.Minute, 10)
}

// meanChurn replays the churn trace of every seed with a fresh alg (one
// per seed, from newAlg) on all cores and returns the mean evictions per
// hour and mean $/h.
func meanChurn(b *testing.B, newAlg func() Algorithm) (float64, float64) {
	b.Helper()
	rs := make([]ChurnResult, len(churnSeeds))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, seed := range churnSeeds {
		g.Go(func() (err error) {
			rs[i], err = replayChurn(newAlg(), seed)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	evictions, price := 0.0, 0.0
	for _, r := range rs {
		evictions += r.EvictionsPerHour()
		price += r.MeanPrice
	}
	n := float64(len(rs))
	return evictions / n, price / n
}

// BenchmarkChurnRestartCost measures the planner's trade between
// evictions and dollars: the churn replay of BenchmarkChurn, mean over its
// eight seeds, for upstream's algorithm, take-any-saving and the planner
// at several restart costs (--consolidation-restart-cost), each reported
// as evictions per hour against upstream's and $/h against the best of
// upstream's and take-any-saving's.
//
//	go test -run '^$' -bench BenchmarkChurnRestartCost -benchtime 1x -timeout 30m ./pkg/disruption/benchmark/
func BenchmarkChurnRestartCost(b *testing.B) {
	for b.Loop() {
		upEv, upPrice := meanChurn(b, Upstream)
		anyEv, anyPrice := meanChurn(b, func() Algorithm {
			return Planner("take-any-saving", repack.Options{SpotToSpot: true, TakeAnySaving: true})
		})
		best := math.Min(upPrice, anyPrice)
		var t strings.Builder
		fmt.Fprintf(&t, "%-22s %10s %13s %10s %14s\n", "algorithm", "evict/h", "% of upstream", "mean $/h", "% above best")
		row := func(name string, ev, price float64) {
			fmt.Fprintf(&t, "%-22s %10.1f %13.1f %10.3f %14.2f\n", name, ev, 100*ev/upEv, price, 100*(price/best-1))
		}
		row("upstream", upEv, upPrice)
		row("take-any-saving", anyEv, anyPrice)
		for _, rc := range []float64{0.006, 0.0075, repack.DefaultRestartCost, 0.01, 0.011, 0.0125, 0.015, 0.02} {
			ev, price := meanChurn(b, func() Algorithm {
				return Planner("planner", repack.Options{SpotToSpot: true, RestartCost: rc})
			})
			name := fmt.Sprintf("planner $%g/pod", rc)
			row(name, ev, price)
			b.ReportMetric(100*ev/upEv, fmt.Sprintf("rc=%g-evictions-%%-of-upstream", rc))
			b.ReportMetric(100*(price/best-1), fmt.Sprintf("rc=%g-$/h-%%-above-best", rc))
		}
		b.Log("\n" + strings.TrimSuffix(t.String(), "\n"))
	}
}

// BenchmarkTraces plays the trace suite (Traces) with upstream's
// algorithm and the planner and reports, per trace, evictions, $/h at the
// end, allocatable CPU over requested CPU and the passes to settle, with
// the planner's $/h and evictions over upstream's. The issue-32 bar for
// making the planner the default: on every held-out trace at most 1.00×
// upstream's $/h and 0.6× its evictions. It also logs the least evictions
// any algorithm needs to reach upstream's step-1 $/h (reportEvictionBound).
//
//	go test -run '^$' -bench 'BenchmarkTraces' -benchtime 1x ./pkg/disruption/benchmark/
//	go test -run '^$' -bench 'BenchmarkTraces/trace=mixed4$' -benchtime 1x ./pkg/disruption/benchmark/
func BenchmarkTraces(b *testing.B) {
	for _, t := range Traces {
		b.Run("trace="+t.Name, func(b *testing.B) {
			for b.Loop() {
				var rs []TraceResult
				algs := []Algorithm{Upstream(), Planner("planner", repack.Options{SpotToSpot: true}), Planner("keep-0.88", repack.Options{SpotToSpot: true, KeepEfficiency: 0.88})}
				if os.Getenv("BENCH_TRACE_ALL") != "" {
					algs = append(algs,
						Planner("any-saving", repack.Options{SpotToSpot: true, TakeAnySaving: true}))
				}
				for _, alg := range algs {
					r, err := t.run(alg)
					if err != nil {
						b.Fatal(err)
					}
					rs = append(rs, r)
					if os.Getenv("BENCH_TRACE_MOVES") != "" {
						b.Logf("%s moves:\n%s", alg.Name, strings.Join(r.Moves, "\n"))
					}
					b.ReportMetric(float64(r.Evictions), alg.Name+"-evictions")
					b.ReportMetric(r.PriceEnd, alg.Name+"-$/h")
					b.ReportMetric(r.AllocPerRequest, alg.Name+"-alloc/req")
					b.ReportMetric(float64(r.Passes), alg.Name+"-passes")
				}
				up := rs[0]
				for _, pl := range rs[1:3] {
					b.ReportMetric(pl.PriceEnd/up.PriceEnd, pl.Algorithm+"/upstream-$/h")
					if up.Evictions > 0 {
						b.ReportMetric(float64(pl.Evictions)/float64(up.Evictions), pl.Algorithm+"/upstream-evictions")
					}
				}
				b.Log("\n" + TraceTable(rs))
				reportEvictionBound(b, t, rs)
			}
		})
	}
}

// reportEvictionBound logs and reports the lower bound on the evictions
// any algorithm needs, from the fleet step 1 starts from (the same for
// every algorithm), to end step 1 at or below upstream's $/h then
// (EvictionLowerBound), over upstream's step-1 evictions. On a trace of
// one consolidating step that is the whole run; on the others it bounds
// step 1 alone. A run that starts step 1 from another fleet, or ends it
// at or below that $/h with fewer evictions than the bound, fails the
// benchmark: the bound is wrong.
func reportEvictionBound(b *testing.B, t Trace, rs []TraceResult) {
	b.Helper()
	c, err := t.FleetAt(1)
	if err != nil {
		b.Fatal(err)
	}
	up := rs[0].Steps[0]
	eb, err := c.EvictionLowerBound(up.PriceEnd)
	if err != nil {
		b.Fatal(err)
	}
	scope := "the run"
	if len(t.Replicas) > 2 {
		scope = "step 1 of " + fmt.Sprint(len(t.Replicas)-1)
	}
	ratio := float64(eb.Evictions) / math.Max(1, float64(up.Evictions))
	verdict := "0.6x upstream's evictions not ruled out"
	if ratio > 0.6 {
		verdict = "0.6x upstream's evictions out of reach"
	}
	b.Logf("eviction lower bound (%s): %d (weak %d); upstream's evictions %d, bound / upstream's %.2f (%s); fleet $%.3f/h, %d nodes (%d empty, %d do-not-disrupt) to $%.3f/h, reachable %v",
		scope, eb.Evictions, eb.Weak, up.Evictions, ratio, verdict, eb.Fleet, eb.Nodes, eb.Empty, eb.Blocked, eb.Target, eb.Reachable)
	b.ReportMetric(float64(eb.Evictions), "eviction-bound")
	b.ReportMetric(ratio, "eviction-bound/upstream")
	for _, r := range rs {
		s := r.Steps[0]
		if s.NodesStart != eb.Nodes || s.PriceStart != eb.Fleet {
			b.Errorf("%s starts step 1 from %d nodes at $%.4f/h, the bound from %d at $%.4f/h", r.Algorithm, s.NodesStart, s.PriceStart, eb.Nodes, eb.Fleet)
		}
		if s.PriceEnd <= eb.Target+1e-9 && (!eb.Reachable || s.Evictions < eb.Evictions) {
			b.Errorf("%s ends step 1 at $%.4f/h (target $%.4f/h) with %d evictions, below the bound %d (reachable %v)",
				r.Algorithm, s.PriceEnd, eb.Target, s.Evictions, eb.Evictions, eb.Reachable)
		}
	}
}
