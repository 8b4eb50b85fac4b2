package repack

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// plan is a worker holding moves of (saving $/h, evictions, reshuffle),
// each priced by the payback gate at $0.01 per eviction over an hour.
func plan(moves ...[3]float64) *worker {
	w := &worker{p: &planner{opts: Options{Horizon: time.Hour}}}
	for _, m := range moves {
		w.moves = append(w.moves, &move{reshuffle: m[2] == 1, payback: disruption.Payback{
			PriceBefore: m[0], Saving: m[0], Evictions: int(m[1]), Cost: 0.01 * m[1], Horizon: time.Hour}})
	}
	return w
}

// TestBeats: a plan replaces another when it dominates it (saves at least
// as much for at most as many evictions), or when the other rests on a
// reshuffle and this one is worth more net of the restarts.
func TestBeats(t *testing.T) {
	for _, tt := range []struct {
		name string
		w, o *worker
		want bool
	}{
		{"saves as much for fewer evictions", plan([3]float64{5, 16, 0}), plan([3]float64{5, 234, 0}), true},
		{"saves less for fewer evictions, against a plan that is no reshuffle", plan([3]float64{5.11, 16, 0}), plan([3]float64{5.37, 234, 0}), false},
		// The end-to-end run: 66 nodes onto 56 of their own type for
		// $5.37/h and 234 evictions, deletes $5.11/h for 16.
		{"saves less for fewer evictions, against a reshuffle worth less net", plan([3]float64{5.11, 16, 0}), plan([3]float64{5.37, 234, 1}), true},
		{"a reshuffle worth more net stays", plan([3]float64{1, 1, 0}), plan([3]float64{5, 40, 1}), false},
		{"saves less for more evictions", plan([3]float64{4, 20, 0}), plan([3]float64{5, 10, 1}), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.w.beats(tt.o))
		})
	}
}
