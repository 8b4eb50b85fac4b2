package disruption

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestSavingsRatioOrder covers upstream's candidate order, shared by
// Emptiness, multi-node and single-node consolidation: price over
// reschedule disruption cost (1 for the node plus its pods' eviction
// costs, not scaled by lifetime), highest first.
func TestSavingsRatioOrder(t *testing.T) {
	its := catalog()
	m2, m4, m8, m16 := typeNamed(its, "m.2x"), typeNamed(its, "m.4x"), typeNamed(its, "m.8x"), typeNamed(its, "m.16x")
	pods := func(prefix string, n int, cpu string) []*corev1.Pod {
		out := make([]*corev1.Pod, n)
		for i := range out {
			out[i] = cpuPod(fmt.Sprintf("%s%d", prefix, i), cpu)
		}
		return out
	}
	// host is a roomy node no method may take (a do-not-disrupt pod), so
	// that any candidate's pods fit elsewhere.
	host := func() *Node {
		return cNode("host", "p", m16, od, withPods(cpuPod("pinned", "100m", annotated("true"))))
	}

	t.Run("sort", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			nodes []*Node
			// cost overrides the lifetime-scaled DisruptionCost, which the
			// order must not read.
			cost map[string]float64
			want []string
		}{
			{
				name: "the node counts as one pod: a dear node of five pods before a cheap node of one",
				nodes: []*Node{
					cNode("a-cheap", "p", m2, od, withPods(pods("a", 1, "100m")...)), // $0.10 / 2
					cNode("b-dear", "p", m8, od, withPods(pods("b", 5, "100m")...)),  // $0.40 / 6
				},
				want: []string{"b-dear", "a-cheap"},
			},
			{
				name: "the lifetime-scaled disruption cost is not read",
				nodes: []*Node{
					cNode("a-busy", "p", m4, od, withPods(pods("a", 3, "100m")...)),  // $0.20 / 4
					cNode("b-light", "p", m4, od, withPods(pods("b", 1, "100m")...)), // $0.20 / 2
				},
				cost: map[string]float64{"a-busy": 0.1, "b-light": 1},
				want: []string{"b-light", "a-busy"},
			},
			{
				name: "empty nodes by price",
				nodes: []*Node{
					cNode("a", "p", m2, od), cNode("b", "p", m16, od), cNode("c", "p", m4, od),
				},
				want: []string{"b", "c", "a"},
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				snap := cSnap(its, []*v1.NodePool{cPool("p")}, tc.nodes)
				cs := discover(snap).all
				for _, c := range cs {
					if v, ok := tc.cost[c.Name()]; ok {
						c.DisruptionCost = v
					}
				}
				sortBySavingsRatio(snap, cs)
				assert.Equal(t, tc.want, names(cs))
			})
		}
	})

	for _, tc := range []struct {
		name   string
		pool   *v1.NodePool
		nodes  []*Node
		method Method
		want   []string
	}{
		{
			name:   "emptiness within a budget of one deletes the dearest empty node",
			pool:   cPool("p", budgets(budget("1"))),
			nodes:  []*Node{cNode("a", "p", m2, od), cNode("b", "p", m8, od)},
			method: Emptiness{},
			want:   []string{"b"},
		},
		{
			name: "single-node tries the node that saves most per pod first",
			pool: cPool("p"),
			nodes: []*Node{
				host(),
				cNode("a-cheap", "p", m2, od, withPods(pods("a", 1, "500m")...)), // $0.10 / 2
				cNode("b-dear", "p", m8, od, withPods(pods("b", 2, "500m")...)),  // $0.40 / 3
			},
			method: single(),
			want:   []string{"b-dear"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(t, cSnap(its, []*v1.NodePool{tc.pool}, tc.nodes), tc.method)
			require.Len(t, d.Commands, 1)
			assert.Equal(t, tc.want, names(d.Commands[0].Candidates))
		})
	}
}
