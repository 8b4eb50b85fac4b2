package repack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// TestNoDrainWhereEvictedPodsSpread: a node the keep rule does not keep
// and no move takes is drained, unless the kube-scheduler's spreading of
// the pass's evicted pods puts some of them on it. The delete of a was
// checked with a1 landing on x (the node with the most room); drained, x
// would send a1 elsewhere, onto nodes the check did not plan for and that
// may be the next to go.
func TestNoDrainWhereEvictedPodsSpread(t *testing.T) {
	big := itype("big", 8, 0.50)
	tests := []struct {
		name     string
		withA    bool
		commands []string
		drain    []string
	}{
		// x's four pods would cost $0.25/h on new machines, but its only
		// replacement is its own type: no move, drained.
		{name: "nothing spreads onto x: drained", drain: []string{"x"}},
		// a's pod fits the kept y best, but spreads onto x.
		{name: "a's evicted pod spreads onto x: not drained", withA: true, commands: []string{"[a]->[]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []*disruption.Node{
				node("x", big, pod("x1", 1000), pod("x2", 1000), pod("x3", 1000), pod("x4", 1000)),
				node("y", big, pod("y1", 7000)),
			}
			if tt.withA {
				nodes = append(nodes, node("a", big, pod("a1", 1000)))
			}
			got, drained := planWithDrain(t, snapshot([]*scheduling.InstanceType{big}, "100%", nodes...), repack.History{})
			assert.Equal(t, tt.commands, got)
			assert.Equal(t, tt.drain, drained)
		})
	}
}
