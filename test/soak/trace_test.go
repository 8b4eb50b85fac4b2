package soak_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpenter-go/karpenter/pkg/disruption/benchmark"
	"github.com/karpenter-go/karpenter/test/anchors"
	"github.com/karpenter-go/karpenter/test/soak"
)

// BenchmarkScaleInTraces plays offline traces (benchmark.Traces) end to
// end, one controller after another on a fresh control plane each: the
// scale-up, then the scale-ins, until the node set has not changed for
// TRACE_QUIET (6m, beyond the planner's cool-down) or TRACE_TIMEOUT (20m)
// has passed since the first scale-in. It prints, per trace, a column per
// controller and the ratios to upstream's kwok controller:
//
//	TRACES=mixed4 TRACE_CONTROLLERS=upstream-kwok,ours-upstream,ours-planner \
//	  go test ./test/soak -run '^$' -bench ScaleInTraces -benchtime 1x -timeout 2h -v
//
// TRACE_OUT, when set, is a folder that receives each run's controller
// log as TRACE-CONTROLLER.log, to line the controllers' disruption commands
// up against each other.
//
// Only the traces on the upstream-kwok catalog (mixed4, mixed4-spot,
// two-scaleins) compare like with like: upstream's kwok controller offers
// no other types.
func BenchmarkScaleInTraces(b *testing.B) {
	cfg := soak.TraceConfig{Logf: b.Logf, Quiet: envDuration(b, "TRACE_QUIET"), Timeout: envDuration(b, "TRACE_TIMEOUT")}
	up, err := anchors.Find("")
	if err != nil {
		b.Fatal(err)
	}
	all := map[string]soak.Controller{
		"ours-upstream": oursWith("upstream"),
		"ours-planner":  oursWith("planner"),
		"upstream-kwok": upstreamKWOK(up),
	}
	names := envList("TRACE_CONTROLLERS", "upstream-kwok,ours-upstream,ours-planner")
	var traces []benchmark.Trace
	for _, name := range envList("TRACES", "mixed4") {
		tr, ok := traceNamed(name)
		if !ok {
			b.Fatalf("unknown trace %q", name)
		}
		traces = append(traces, tr)
	}
	var results []*soak.TraceResult
	for i := 0; i < b.N; i++ {
		for _, tr := range traces {
			for _, name := range names {
				ctrl, ok := all[name]
				if !ok {
					b.Fatalf("unknown controller %q", name)
				}
				full := cfg.Defaults()
				ctx, cancel := context.WithTimeout(context.Background(), full.BuildTimeout+full.Timeout+10*time.Minute)
				res, err := soak.RunTrace(ctx, tr, cfg, ctrl)
				cancel()
				if dir := os.Getenv("TRACE_OUT"); dir != "" && res != nil {
					keepLog(b, dir, tr.Name+"-"+name+".log", res.ControllerLog)
				}
				if err != nil {
					b.Fatalf("%s/%s: %v", tr.Name, name, err)
				}
				if len(res.Panics) > 0 {
					b.Errorf("%s/%s panicked: %v", tr.Name, name, res.Panics)
				}
				results = append(results, res)
			}
		}
	}
	b.Log("\n" + soak.TraceTable(results))
}

func traceNamed(name string) (benchmark.Trace, bool) {
	for _, tr := range benchmark.Traces {
		if tr.Name == name {
			return tr, true
		}
	}
	return benchmark.Trace{}, false
}

func envList(key, def string) []string {
	v := os.Getenv(key)
	if v == "" {
		v = def
	}
	return strings.Split(v, ",")
}

// keepLog writes a controller's log into dir; a failure to keep it does
// not fail the benchmark, whose figures stand without it.
func keepLog(b *testing.B, dir, name, log string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Logf("keeping log: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(log), 0o644); err != nil {
		b.Logf("keeping log: %v", err)
	}
}
