package repack

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// plan is a worker holding moves of (saving $/h, evictions), each priced
// by the payback gate at $0.01 per eviction over an hour.
func plan(moves ...[2]float64) *worker {
	w := &worker{p: &planner{opts: Options{Horizon: time.Hour}}}
	for _, m := range moves {
		w.moves = append(w.moves, &move{payback: disruption.Payback{
			PriceBefore: m[0], Saving: m[0], Evictions: int(m[1]), Cost: 0.01 * m[1], Horizon: time.Hour}})
	}
	return w
}

// TestBeats: a plan replaces another when it is worth more net of the
// restarts it causes, or as much and it dominates (saves at least as much
// for at most as many evictions).
func TestBeats(t *testing.T) {
	for _, tt := range []struct {
		name string
		w, o *worker
		want bool
	}{
		{"saves as much for fewer evictions", plan([2]float64{5, 16}), plan([2]float64{5, 234}), true},
		// The end-to-end run: 66 nodes onto 56 of their own type for
		// $5.37/h and 234 evictions, deletes $5.11/h for 16.
		{"saves less for far fewer evictions", plan([2]float64{5.11, 16}), plan([2]float64{5.37, 234}), true},
		// The anti-affinity trace's first pass: a batch of four deletes
		// against one N→M move of 18 nodes.
		{"a batch of deletes against a group move worth less net", plan([2]float64{0.391, 8}, [2]float64{0.105, 2}, [2]float64{0.098, 2}, [2]float64{0.391, 12}), plan([2]float64{1.085, 56}), true},
		{"a group move worth more net stays", plan([2]float64{1, 1}), plan([2]float64{5, 40}), false},
		{"saves less for more evictions", plan([2]float64{4, 20}), plan([2]float64{5, 10}), false},
		{"the same net, more evictions", plan([2]float64{5, 10}), plan([2]float64{4.9, 0}), false},
		{"the same net and the same plan", plan([2]float64{5, 10}), plan([2]float64{5, 10}), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.w.beats(tt.o))
		})
	}
}

// TestSortUpstream: candidates go in upstream's order, price over 1 plus
// their pods' eviction costs, highest first.
func TestSortUpstream(t *testing.T) {
	m := func(name string, price float64, pods int) *machine {
		n := &disruption.Node{}
		for i := 0; i < pods; i++ {
			n.Pods = append(n.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", APIVersion: "apps/v1"}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		}
		return &machine{name: name, price: price, node: n, candidate: &disruption.Candidate{Node: n, DisruptionCost: float64(pods)}}
	}
	for _, tt := range []struct {
		name  string
		cands []*machine
		want  []string
	}{
		// $0.3909/9 = 0.0434 against $0.0489/2 = 0.0245: counting the
		// pods alone ranks them the other way (20.46 pods per dollar
		// against 20.45).
		{"a large node of eight pods before a small node of one", []*machine{m("small", 0.0489, 1), m("large", 0.3909, 8)}, []string{"large", "small"}},
		{"empty nodes by price", []*machine{m("a", 0.1, 0), m("b", 0.2, 0)}, []string{"b", "a"}},
		{"ties by name", []*machine{m("b", 0.1, 1), m("a", 0.1, 1)}, []string{"a", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sortUpstream(tt.cands)
			var got []string
			for _, c := range tt.cands {
				got = append(got, c.name)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
