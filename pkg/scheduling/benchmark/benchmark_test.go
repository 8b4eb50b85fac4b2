package benchmark

import (
	"testing"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

// BenchmarkScheduling runs upstream's scheduling benchmark cases in upstream's
// order. Each case gets the pods it has in the canonical stream
// (workload.CaseByName), whatever -bench filter or -count is used, so results
// compare with the published baseline. Only Solve is timed.
//
//	go test ./pkg/scheduling/benchmark -run '^$' -bench 'Scheduling/Scheduling5000$' -benchtime 1x
func BenchmarkScheduling(b *testing.B) {
	cat := workload.Catalogue()
	types, err := InstanceTypes(cat)
	if err != nil {
		b.Fatal(err)
	}
	for _, spec := range workload.CaseOrder {
		b.Run(spec.Name, func(b *testing.B) {
			c, err := workload.CaseByName(spec.Name)
			if err != nil {
				b.Fatal(err)
			}
			in := Input(c, NodePool(types))
			b.ReportAllocs()
			b.ResetTimer()
			var res *scheduling.Result
			for b.Loop() {
				res = scheduling.Solve(in)
			}
			b.StopTimer()

			m, err := Measure(res, c.Pods, cat)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(c.Pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			b.ReportMetric(float64(m.NodeClaims), "nodeclaims")
			b.ReportMetric(m.Cost, "cost")
			b.ReportMetric(m.Ratio, "cost/bound")
			b.ReportMetric(float64(m.Unscheduled), "unscheduled")
		})
	}
}
