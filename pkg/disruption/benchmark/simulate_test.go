package benchmark

import (
	"context"
	"testing"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// BenchmarkSimulations builds and solves one simulation per node, as
// single-node consolidation does in a pass, over the 1,000-node synthetic
// cluster (after a 30% scale-in): read straight from the pass's view
// ("view"), and through snapshot.Memo ("memo"), as the controller's
// simulators read it. Each iteration simulates 100 nodes.
//
//	go test -run '^$' -bench Simulations -benchmem ./pkg/disruption/benchmark/
func BenchmarkSimulations(b *testing.B) {
	c, err := NewCluster(1000, 0.3, 1)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := snapshot.Request{Options: snapshot.Options{Solver: scheduling.Options{Robust: true}}}
	for _, mode := range []string{"view", "memo"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				view := c.Snap.View()
				if mode == "memo" {
					view = snapshot.Memo(view)
				}
				for _, n := range c.Snap.Nodes[:100] {
					req.Remove = map[string]bool{n.Name(): true}
					snap, err := snapshot.Build(ctx, view, req)
					if err != nil {
						b.Fatal(err)
					}
					scheduling.Solve(snap.Input)
				}
			}
		})
	}
}
