package repack_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

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

// TestGroupSolvedWithoutTypesDearerThanIt: the solver sizes a group's new
// NodeClaims as provisioning does, as few as possible, so the 17 vCPU of
// three 8-vCPU nodes ($1.20/h) would go onto one 24-vCPU machine dearer
// than the three. A type as dear as the whole group can be part of no
// cheaper move: without it the pods go onto a 16-vCPU and a 2-vCPU machine
// ($0.96/h), with the 24-vCPU type in the catalog or not. No single move
// exists: no node has room for another's pods, and a node's own pods need
// its own type (two 2-vCPU machines cost more than one 8-vCPU).
func TestGroupSolvedWithoutTypesDearerThanIt(t *testing.T) {
	s2, m8, l16, x24 := itype("s2", 2, 0.16), itype("m8", 8, 0.40), itype("l16", 16, 0.80), itype("x24", 24, 1.40)
	pods := func(prefix string, n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := 0; i < n; i++ {
			out = append(out, pod(fmt.Sprintf("%s%d", prefix, i), 1000))
		}
		return out
	}
	tests := []struct {
		name  string
		types []*scheduling.InstanceType
	}{
		{name: "a type holding every pod costs more than the group", types: []*scheduling.InstanceType{s2, m8, l16, x24}},
		{name: "no type holds every pod", types: []*scheduling.InstanceType{s2, m8, l16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := snapshot(tt.types, "100%",
				node("a", m8, pods("a", 6)...), node("b", m8, pods("b", 6)...), node("c", m8, pods("c", 5)...))
			got, _ := planWithDrain(t, snap, repack.History{})
			assert.Equal(t, []string{"[c a b]->[l16 s2]"}, got)
		})
	}
}
