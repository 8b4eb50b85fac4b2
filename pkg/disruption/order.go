package disruption

import "sort"

// sortBySavingsRatio orders candidates as upstream's Emptiness, multi-node
// and single-node consolidation all do: by price over reschedule
// disruption cost, highest first, so that the nodes that save the most per
// unit of disruption are tried first. The reschedule cost is
// NodeDisruption's (1 for the node plus the non-negative eviction costs of
// its reschedulable pods, not scaled by the remaining lifetime), which keeps
// the ratio finite for empty nodes and ranks them by price. A candidate
// that cannot be priced ranks as free. Ties go by name, so a pass is
// deterministic.
func sortBySavingsRatio(snap *Snapshot, cs []*Candidate) {
	ratio := make(map[*Candidate]float64, len(cs))
	for _, c := range cs {
		price, err := nodePrice(snap, c.Node)
		if err != nil {
			price = 0
		}
		ratio[c] = price / NodeDisruption(c.Node)
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if ratio[cs[i]] != ratio[cs[j]] {
			return ratio[cs[i]] > ratio[cs[j]]
		}
		return cs[i].Name() < cs[j].Name()
	})
}
