package benchmark

import (
	"regexp"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

// heapSampler records, while a solve runs, the peak of two runtime/metrics
// values, read every `every` on its own goroutine (metrics.Read does not
// stop the world):
//   - /memory/classes/heap/objects:bytes, the heap occupied by objects live
//     or not yet swept (what MemStats calls HeapAlloc);
//   - /gc/heap/live:bytes, the heap found live by the latest finished GC.
//
// A spike shorter than the interval can be missed.
type heapSampler struct {
	stop, done         chan struct{}
	peakHeap, peakLive uint64
}

const (
	metricHeapObjects = "/memory/classes/heap/objects:bytes"
	metricHeapLive    = "/gc/heap/live:bytes"
)

func readHeap() (objects, live uint64) {
	s := []metrics.Sample{{Name: metricHeapObjects}, {Name: metricHeapLive}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	samples := []metrics.Sample{{Name: metricHeapObjects}, {Name: metricHeapLive}}
	read := func() {
		metrics.Read(samples)
		h.peakHeap = max(h.peakHeap, samples[0].Value.Uint64())
		h.peakLive = max(h.peakLive, samples[1].Value.Uint64())
	}
	read()
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return h
}

// Stop ends sampling and returns the peaks in bytes.
func (h *heapSampler) Stop() (peakHeap, peakLive uint64) {
	close(h.stop)
	<-h.done
	return h.peakHeap, h.peakLive
}

const mib = 1 << 20

// BenchmarkScale solves the scale workload (GenerateScale): pods of mixed
// shapes, 20% with zonal spread and 10% with hostname anti-affinity, three
// NodePools over a 700-type catalogue in 3 zones × 2 capacity types, and a
// cluster of existing nodes that already run pods. Generation is not timed;
// only Solve is. Besides ns/op and the -benchmem figures (B/op is total
// allocation, not peak) it reports:
//
//	pods/s            pending pods / Solve wall time
//	peak-heap-MiB     peak of /memory/classes/heap/objects:bytes (≈HeapAlloc)
//	                  sampled every 1ms during Solve; includes the snapshot
//	solve-heap-MiB    the same peak minus its value after a GC just before Solve
//	peak-live-MiB     peak of /gc/heap/live:bytes (live heap at the last GC)
//	nodeclaims, unscheduled, on-existing
//	cost              $/h of the new NodeClaims' cheapest launchable offerings
//	cost/bound        cost ÷ LP bound on new capacity (MeasureScale)
//	cost/packing-bound cost ÷ LP bound for the pods placed on new NodeClaims
//	violations        CheckPlan errors (0 for a sound plan)
//
// The target is pods/s ≥ 5,000 and peak heap < 1 GiB at 20,000 pods:
//
//	go test ./pkg/scheduling/benchmark -run '^$' -bench 'Scale/pods=20000' -benchtime 1x -benchmem
func BenchmarkScale(b *testing.B) {
	for _, size := range []struct {
		name        string
		pods, nodes int
	}{
		{"pods=500,nodes=50", 500, 50},
		{"pods=2000,nodes=100", 2000, 100},
		{"pods=20000,nodes=1000", 20000, 1000},
	} {
		b.Run(size.name, func(b *testing.B) {
			w, err := GenerateScale(ScaleConfigFor(size.pods, size.nodes))
			if err != nil {
				b.Fatal(err)
			}
			runScale(b, w)
		})
	}
}

func runScale(b *testing.B, w *ScaleWorkload) {
	in := w.Input
	runtime.GC()
	base, _ := readHeap()
	b.ReportAllocs()
	b.ResetTimer()
	sampler := startHeapSampler(time.Millisecond)
	var res *scheduling.Result
	for b.Loop() {
		res = scheduling.Solve(in)
	}
	peakHeap, peakLive := sampler.Stop()
	b.StopTimer()

	m, err := MeasureScale(res, in, w.Catalogue)
	if err != nil {
		b.Fatal(err)
	}
	violations := CheckPlan(in, res)
	logViolations(b, violations)
	b.ReportMetric(float64(len(in.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(peakHeap)/mib, "peak-heap-MiB")
	b.ReportMetric(float64(int64(peakHeap)-int64(base))/mib, "solve-heap-MiB")
	b.ReportMetric(float64(peakLive)/mib, "peak-live-MiB")
	b.ReportMetric(float64(m.NodeClaims), "nodeclaims")
	b.ReportMetric(float64(m.Unscheduled), "unscheduled")
	b.ReportMetric(float64(m.OnExisting), "on-existing")
	b.ReportMetric(m.Cost, "cost")
	b.ReportMetric(m.Ratio, "cost/bound")
	b.ReportMetric(m.PackingRatio, "cost/packing-bound")
	b.ReportMetric(float64(len(violations)), "violations")
}

// BenchmarkQuality is the quality figure for workloads without constraints:
// the $/h of the planned NodeClaims divided by the LP lower bound
// (workload.LowerBound) for the placed pods. The target is
// cost/bound ≤ 1.10.
//
//   - upstream-generic: the generic pods (no spread, affinity or
//     preferences) of upstream's Scheduling20000 case, on upstream's
//     400-type catalogue and single pool;
//
//   - scale-plain: 5,000 pods of the scale workload's shapes with no
//     constraints, one unconstrained pool over the 700-type catalogue, an
//     empty cluster.
//
//     go test ./pkg/scheduling/benchmark -run '^$' -bench Quality -benchtime 1x
func BenchmarkQuality(b *testing.B) {
	b.Run("upstream-generic", func(b *testing.B) {
		cat, in, err := upstreamGenericInput()
		if err != nil {
			b.Fatal(err)
		}
		var res *scheduling.Result
		for b.Loop() {
			res = scheduling.Solve(in)
		}
		b.StopTimer()
		m, err := Measure(res, in.Pods, cat)
		if err != nil {
			b.Fatal(err)
		}
		violations := CheckPlan(in, res)
		logViolations(b, violations)
		reportQuality(b, len(in.Pods), m, len(violations))
	})
	b.Run("scale-plain", func(b *testing.B) {
		w, err := GenerateScale(PlainScaleConfig(5000))
		if err != nil {
			b.Fatal(err)
		}
		var res *scheduling.Result
		for b.Loop() {
			res = scheduling.Solve(w.Input)
		}
		b.StopTimer()
		m, err := MeasureScale(res, w.Input, w.Catalogue)
		if err != nil {
			b.Fatal(err)
		}
		violations := CheckPlan(w.Input, res)
		logViolations(b, violations)
		reportQuality(b, len(w.Input.Pods), m.Metrics, len(violations))
	})
}

// logViolations logs how many violations of each kind a plan has, with one
// example each; the kind is the message with numbers and names blurred.
func logViolations(b *testing.B, violations []error) {
	blur := regexp.MustCompile(`[0-9]+(\.[0-9]+)?|[a-z]+/[a-z0-9-]+|[a-z][a-z0-9]*\.[a-z0-9]+`)
	count := map[string]int{}
	example := map[string]string{}
	var kinds []string
	for _, v := range violations {
		k := blur.ReplaceAllString(v.Error(), "_")
		if count[k] == 0 {
			kinds = append(kinds, k)
			example[k] = v.Error()
		}
		count[k]++
	}
	for _, k := range kinds {
		b.Logf("%d× %s", count[k], example[k])
	}
}

func reportQuality(b *testing.B, pods int, m Metrics, violations int) {
	b.ReportMetric(float64(pods)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(m.NodeClaims), "nodeclaims")
	b.ReportMetric(float64(m.Unscheduled), "unscheduled")
	b.ReportMetric(m.Cost, "cost")
	b.ReportMetric(m.Bound, "bound")
	b.ReportMetric(m.Ratio, "cost/bound")
	b.ReportMetric(float64(violations), "violations")
}

// upstreamGenericInput is upstream's Scheduling20000 case reduced to its
// generic pods, on upstream's catalogue and pool.
func upstreamGenericInput() ([]workload.InstanceType, *scheduling.Input, error) {
	c, err := workload.CaseByName("Scheduling20000")
	if err != nil {
		return nil, nil, err
	}
	cat := workload.Catalogue()
	types, err := InstanceTypes(cat)
	if err != nil {
		return nil, nil, err
	}
	generic := c
	generic.Pods = nil
	for i, r := range c.Records {
		if r.Group == workload.Generic {
			generic.Pods = append(generic.Pods, c.Pods[i])
		}
	}
	return cat, Input(generic, NodePool(types)), nil
}
