package repack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// TestGroupPrefix: when the N→M move of every node left has no move (here
// the budget allows two of the three), the longest prefix of them that has
// one is taken, as upstream's multi-node consolidation searches for it.
// No single move exists: a 5-vCPU pod fits only a node of its own size or
// the 16-vCPU type, and no node has room for another's pod.
func TestGroupPrefix(t *testing.T) {
	big, huge := itype("big", 8, 0.50), itype("huge", 16, 0.80)
	tests := []struct {
		name     string
		budget   string
		commands []string
	}{
		{name: "the whole group", budget: "100%", commands: []string{"[a b c]->[huge]"}},
		{name: "the budget's prefix of it", budget: "2", commands: []string{"[a b]->[huge]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot([]*scheduling.InstanceType{big, huge}, tt.budget,
				node("a", big, pod("a1", 5000)), node("b", big, pod("b1", 5000)), node("c", big, pod("c1", 5000)))
			got, _ := planWithDrain(t, snap, repack.History{})
			assert.Equal(t, tt.commands, got)
		})
	}
}
