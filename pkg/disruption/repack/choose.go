package repack

// choose plans the pool three ways and keeps the plan worth the most net
// of the restarts it causes (net: the payback gate's saving over the
// horizon less its disruption cost, summed over the plan's moves): groups
// first (repack), deletes first (repackDeletesFirst, only when groups
// first has a group move; otherwise the two differ only in what follows
// the deletes, which repack leaves to the next pass) and a batch of
// deletes first (repackBatchFirst). Groups first wins after a scale-in
// that leaves many nodes a little underused: one N→M move empties them
// all, where deletes would fill the few holes and freeze their receivers
// for the cool-down. Deletes first wins where the holes take whole nodes'
// pods and a group evicts many pods for what the deletes save anyway.
// The batch wins where the emptiest nodes can all go at once: deleted one
// by one, each one's pods spread onto the next emptiest, which then
// cannot leave. Ranking by net value is the payback gate applied to the
// difference between two plans: a plan that saves more is kept only when
// what it saves beyond the other pays for the restarts it adds. It
// returns cands as the kept plan's nodes.
func (w *worker) choose(cands []*machine) []*machine {
	byDeletes, idxD := w.clone()
	byBatch, idxB := w.clone()
	w.repack(cands)
	best, bestCands := w, cands
	grouped := false
	for _, mv := range w.moves {
		grouped = grouped || len(mv.cands) > 1
	}
	if grouped {
		dc := mapNodes(cands, idxD)
		byDeletes.repackDeletesFirst(dc)
		if byDeletes.beats(best) {
			best, bestCands = byDeletes, dc
		}
	}
	bc := mapNodes(cands, idxB)
	byBatch.repackBatchFirst(bc)
	if byBatch.beats(best) {
		best, bestCands = byBatch, bc
	}
	solves := w.solves + byDeletes.solves + byBatch.solves
	if best != w {
		*w = *best
	}
	w.solves = solves
	return bestCands
}

func mapNodes(ms []*machine, idx map[*machine]*machine) []*machine {
	out := make([]*machine, len(ms))
	for i, m := range ms {
		out[i] = idx[m]
	}
	return out
}

// beats reports whether w's plan is to be kept over o's: it is worth more
// net of the restarts it causes, or as much and it dominates o's. An N→M
// move that saves $0.10/h more than a batch of deletes for 32 more
// evictions costs more in restarts ($0.29 at the default restart cost)
// than it saves over the hour, however much the pass saves in all.
func (w *worker) beats(o *worker) bool {
	wn, on := w.net(), o.net()
	return wn > on+1e-9 || (wn >= on-1e-9 && w.dominates(o))
}

// net is the plan's saving over the horizon less the payback gate's
// disruption cost, summed over its moves.
func (w *worker) net() float64 {
	v := 0.0
	for _, mv := range w.moves {
		v += mv.payback.Saving - mv.payback.Cost
	}
	return v
}

// dominates reports whether w's plan saves at least as much $/h as o's
// with at most as many evictions, one of them strictly.
func (w *worker) dominates(o *worker) bool {
	ws, we := w.totals()
	ts, te := o.totals()
	return ws >= ts-1e-9 && we <= te && (ws > ts+1e-9 || we < te)
}

// totals are the worker's moves' saving ($/h) and evictions.
func (w *worker) totals() (float64, int) {
	saving, evictions := 0.0, 0
	for _, mv := range w.moves {
		saving += mv.payback.PriceBefore - mv.payback.PriceAfter
		evictions += mv.payback.Evictions
	}
	return saving, evictions
}
