package repack

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// repack plans the pool's moves in three steps. Each step's evicted pods
// must land where the next can see them, and a pod a move evicts holds its
// new node for the cool-down, so the order matters:
//
//  1. the inefficient candidates are deleted into the kept nodes' free
//     room (those nodes stay anyway, so holding them costs nothing);
//  2. the inefficient rest is repacked onto new NodeClaims in groups,
//     which concentrates the evicted pods on the new nodes;
//  3. if no group move was found, any candidate is deleted into any
//     node's free room, least disruption per dollar first: in a churning
//     cluster the scale-ins leave holes everywhere, and filling them is
//     the cheapest saving there is. Replacements then wait for the next
//     pass, since the kube-scheduler may put the deleted nodes' pods on
//     new NodeClaims; without deletes, single replacements and splits.
func (w *worker) repack(cands []*machine) {
	rest, later := w.deleteIntoKept(cands)
	n := len(w.moves)
	left := w.tryGroups(rest)
	if len(w.moves) > n {
		w.replaceEach(left)
		return
	}
	n = len(w.moves)
	rest = w.deleteAnywhere(later)
	if len(w.moves) > n {
		for _, m := range rest {
			v := verdict(m.candidate, KindAfterDeletes, nil)
			v.Detail = "Node is repacked after this pass's deletes have settled"
			w.verdicts[m.name] = v
		}
		return
	}
	w.replaceEach(rest)
}

// repackDeletesFirst plans the pool with the deletes before the groups:
// the inefficient candidates are deleted into the kept nodes' room, then
// any candidate into any node's room (least disruption per dollar first),
// then what is left of the inefficient nodes is repacked in N→M groups
// and single replacements.
func (w *worker) repackDeletesFirst(cands []*machine) {
	_, later := w.deleteIntoKept(cands)
	w.replaceEach(w.tryGroups(w.deleteAnywhere(later)))
}

// repackBatchFirst plans the pool as upstream's multi-node consolidation
// starts (deleteBatch), then the candidates left as repackDeletesFirst
// does after its first step: deletes into any node's room, groups and
// replacements.
func (w *worker) repackBatchFirst(cands []*machine) {
	w.deleteBatch(cands)
	var rest []*machine
	for _, m := range cands {
		if !m.removed {
			rest = append(rest, m)
		}
	}
	w.replaceEach(w.tryGroups(w.deleteAnywhere(rest)))
}

// deleteBatch deletes together the longest prefix (of at least two, found
// by binary search as upstream's multi-node consolidation does, among at
// most MaxMultiNodeCandidates) of the candidates in order whose pods all
// fit in the room of the nodes outside it: best fit, the kube-scheduler's
// spreading, and the solver. Each node is its own delete command and
// passes the payback gate on its own.
func (w *worker) deleteBatch(cands []*machine) {
	var order []*machine
	for _, m := range cands {
		if len(order) == disruption.MaxMultiNodeCandidates {
			break
		}
		if m.removed || m.receiver || !w.pays(w.payback([]*machine{m}, 0)) {
			continue
		}
		order = append(order, m)
	}
	type attempt struct {
		res  *scheduling.Result
		free []vec
	}
	try := func(k int) *attempt {
		set := make(map[*machine]bool, k)
		var pods []*corev1.Pod
		for _, m := range order[:k] {
			set[m] = true
			pods = append(pods, m.candidate.Reschedulable...)
		}
		dests, ok := w.fit(pods, set, true, true, true)
		if !ok {
			return nil
		}
		free, ok := w.spread(pods, set, nil)
		if !ok {
			return nil
		}
		in, _ := w.input(pods, dests, set, nil)
		res := w.solve(in)
		for _, pl := range res.Placements {
			if pl.Node == "" {
				return nil
			}
		}
		return &attempt{res: res, free: free}
	}
	var found *attempt
	k := 0
	for lo, hi := 2, min(len(order), w.budget); lo <= hi; {
		mid := (lo + hi) / 2
		if a := try(mid); a != nil {
			found, k, lo = a, mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	if found == nil {
		return
	}
	for i, m := range order[:k] {
		res := found.res
		if i > 0 {
			// The placements are applied once, with the first move.
			res = &scheduling.Result{}
		}
		w.apply(&move{cands: []*machine{m}, payback: w.payback([]*machine{m}, 0)}, res)
	}
	w.spreadRoom = found.free
}

// deleteIntoKept deletes the inefficient candidates into the kept nodes'
// free room (step 1). It returns the inefficient candidates left (rest)
// and every candidate still to consider, kept ones included (later).
func (w *worker) deleteIntoKept(cands []*machine) (rest, later []*machine) {
	for _, m := range cands {
		if w.keep[m] {
			later = append(later, m)
			continue
		}
		if w.skip(m) {
			continue
		}
		if !w.tryDelete(m, false) {
			rest = append(rest, m)
			later = append(later, m)
		}
	}
	return rest, later
}

// deleteAnywhere deletes candidates into any node's free room but the
// held ones, in order, and returns the inefficient ones it left.
func (w *worker) deleteAnywhere(cands []*machine) []*machine {
	var rest []*machine
	for _, m := range cands {
		if w.skip(m) {
			continue
		}
		if !w.tryDelete(m, true) && !w.keep[m] {
			rest = append(rest, m)
		}
	}
	return rest
}

// replaceEach tries a single replacement (or split) of each node left.
func (w *worker) replaceEach(ms []*machine) {
	for _, m := range ms {
		if w.skip(m) {
			continue
		}
		w.tryReplace(m)
	}
}

// tryDelete moves every pod of m into free room elsewhere: the kept
// nodes', or with anywhere any node's but the held ones.
func (w *worker) tryDelete(m *machine, anywhere bool) bool {
	pods := m.candidate.Reschedulable
	pb := w.payback([]*machine{m}, 0)
	if !w.pays(pb) {
		// A replacement saves less for the same evictions.
		w.gateVerdict([]*machine{m}, pb)
		return true
	}
	dests, ok := w.fit(pods, map[*machine]bool{m: true}, true, true, anywhere)
	if !ok {
		return false
	}
	// The kube-scheduler's spreading must place the pods too. Its room is
	// kept for the pass's next checks only if the delete is taken: a
	// delete the solver then refuses evicts nothing.
	free, ok := w.spread(pods, map[*machine]bool{m: true}, nil)
	if !ok {
		return false
	}
	in, _ := w.input(pods, dests, map[*machine]bool{m: true}, nil)
	res := w.solve(in)
	for _, pl := range res.Placements {
		if pl.Node == "" {
			return false
		}
	}
	w.spreadRoom = free
	w.apply(&move{cands: []*machine{m}, payback: pb}, res)
	return true
}

// tryReplace moves m's pods to free room elsewhere and cheaper new
// NodeClaims: one, or two of at most half its size (a split).
func (w *worker) tryReplace(m *machine) bool {
	return w.tryMove([]*machine{m})
}

// tryGroups tries N→M moves over the nodes left, emptiest first, in
// groups of GroupSize, and returns the nodes no group move took.
func (w *worker) tryGroups(left []*machine) []*machine {
	g := w.p.opts.GroupSize
	if g < 2 {
		return left
	}
	var out []*machine
	for i := 0; i < len(left); i += g {
		var chunk []*machine
		for _, m := range left[i:min(i+g, len(left))] {
			if !m.removed && !m.receiver {
				chunk = append(chunk, m)
			}
		}
		if len(chunk) < 2 || w.budget < len(chunk) || !w.tryMove(chunk) {
			out = append(out, w.tryGroupPrefix(chunk)...)
		}
	}
	return out
}

// tryGroupPrefix finds, when the whole group has no move, the longest
// prefix of it (at least two nodes, by binary search as upstream's
// multi-node consolidation does) that has one, and takes it. The nodes are
// in upstream's order: the prefix is the nodes that save the most per pod
// moved. It returns the nodes left.
func (w *worker) tryGroupPrefix(chunk []*machine) []*machine {
	k := 0
	for lo, hi := 2, min(len(chunk)-1, w.budget); lo <= hi; {
		mid := (lo + hi) / 2
		room := w.spreadRoom
		mv, _ := w.planMove(chunk[:mid])
		w.spreadRoom = room
		if mv != nil {
			k, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	if k == 0 || !w.tryMove(chunk[:k]) {
		return chunk
	}
	return chunk[k:]
}

// tryMove plans cands' pods onto free room and new NodeClaims and takes
// the move when it pays; with one candidate it also tries a split.
func (w *worker) tryMove(cands []*machine) bool {
	best, res := w.planMove(cands)
	if best == nil {
		return false
	}
	w.apply(best, res)
	return true
}

// planMove is tryMove without carrying the move out: the move and its
// solve, or nil (with a verdict when cands is one node). It keeps the
// spreading's room for the next check when the move is found.
func (w *worker) planMove(cands []*machine) (*move, *scheduling.Result) {
	var pods []*corev1.Pod
	leaving := map[*machine]bool{}
	for _, m := range cands {
		pods = append(pods, m.candidate.Reschedulable...)
		leaving[m] = true
	}
	dests, _ := w.fit(pods, leaving, false, false, false)
	// The cheapest conceivable fleet for what fits nowhere: if even that
	// does not pay, do not solve.
	var rest vec
	for i, d := range dests {
		if d == nil {
			rest = rest.add(w.p.reqs[pods[i]])
		}
	}
	unit := w.p.perUnit[w.pool]
	floor := math.Max(rest[0]*unit[0], rest[1]*unit[1])
	if pb := w.payback(cands, floor); !w.pays(pb) {
		if len(cands) == 1 {
			if pb.PriceBefore-floor <= 1e-9 {
				w.verdicts[cands[0].name] = verdict(cands[0].candidate, KindNoCheaperPlacement, &disruption.ConsolidationDetail{Price: pb.PriceBefore, ReplacementPrice: floor})
			} else {
				w.gateVerdict(cands, pb)
			}
		}
		return nil, nil
	}
	in, _ := w.input(pods, dests, leaving, w.p.pools)
	res := w.solve(in)
	best, bv := w.evaluate(cands, res)
	if best == nil && len(cands) > 1 && bv != nil && bv.Kind == disruption.KindNotCheaper {
		// The solver sizes NodeClaims as provisioning does, as few as
		// possible: a group's pods go onto one machine as large as they
		// need, which can cost more than the group (three spot nodes of
		// 75 vCPU onto a c7a.24xlarge) where the largest type the group
		// can afford and a small one beside it cost less. No type as
		// dear as the whole group can be part of a cheaper move, so the
		// group is solved again without them.
		before := 0.0
		for _, m := range cands {
			before += m.price
		}
		if pools := w.cheaperPools(before); pools != nil {
			in.NodePools = pools
			cres := w.solve(in)
			if alt, _ := w.evaluate(cands, cres); alt != nil {
				best, res = alt, cres
			}
		}
	}
	if len(cands) == 1 && !w.p.opts.NoSplit && len(pods) >= 2 {
		if pools := w.splitPools(cands[0]); pools != nil {
			in.NodePools = pools
			sres := w.solve(in)
			// A split trades one machine for several smaller ones: less
			// room for the next scale-up and more DaemonSet overhead, so
			// it is taken only when it saves at least SplitSaving of the
			// node's price: per evicted pod a split saves much less than a
			// delete.
			if alt, _ := w.evaluate(cands, sres); alt != nil && (best == nil || alt.payback.PriceAfter < best.payback.PriceAfter) &&
				alt.payback.PriceAfter <= (1-w.p.opts.SplitSaving)*alt.payback.PriceBefore {
				best, res = alt, sres
			}
		}
	}
	if best == nil {
		if len(cands) == 1 && bv != nil {
			w.verdicts[cands[0].name] = *bv
		}
		return nil, nil
	}
	if !w.pays(best.payback) {
		if len(cands) == 1 {
			w.gateVerdict(cands, best.payback)
		}
		return nil, nil
	}
	if !w.moveSpreads(pods, leaving, best) {
		if len(cands) == 1 {
			v := verdict(cands[0].candidate, KindSpreadMisfit, &disruption.ConsolidationDetail{Price: best.payback.PriceBefore, ReplacementPrice: best.payback.PriceAfter})
			v.Detail = fmt.Sprintf("Replacing the node ($%.4f/h → $%.4f/h) places its pods only as planned: the kube-scheduler's own spreading over the free room and the new nodes would leave some without room",
				best.payback.PriceBefore, best.payback.PriceAfter)
			w.verdicts[cands[0].name] = v
		}
		return nil, nil
	}
	return best, res
}

// splitPools are the pools cut to types of at most half m's cpu and
// memory, which forces the solver to split m's pods over two or more
// smaller (possibly different-family) machines.
func (w *worker) splitPools(m *machine) []*scheduling.NodePool {
	it := w.p.types[m.pool][m.instanceType]
	if it == nil {
		return nil
	}
	capv := toVec(it.Capacity)
	if capv[0] < 4000 {
		return nil
	}
	key := [2]float64{capv[0], capv[1]}
	if w.split == nil {
		w.split = map[[2]float64][]*scheduling.NodePool{}
	}
	if pools, ok := w.split[key]; ok {
		return pools
	}
	var out []*scheduling.NodePool
	for _, sp := range w.p.pools {
		cp := *sp
		cp.InstanceTypes = nil
		for _, t := range sp.InstanceTypes {
			c := toVec(t.Capacity)
			if c[0] <= capv[0]/2 && c[1] <= capv[1]/2 {
				cp.InstanceTypes = append(cp.InstanceTypes, t)
			}
		}
		if len(cp.InstanceTypes) > 0 {
			out = append(out, &cp)
		}
	}
	w.split[key] = out
	return out
}

// cheaperPools are the pools cut to the types whose cheapest offering
// costs less than limit ($/h), or nil when that leaves no pool a type.
func (w *worker) cheaperPools(limit float64) []*scheduling.NodePool {
	var out []*scheduling.NodePool
	for _, sp := range w.p.pools {
		cp := *sp
		cp.InstanceTypes = nil
		for _, t := range sp.InstanceTypes {
			if buyPrice(sp, t) < limit-1e-9 {
				cp.InstanceTypes = append(cp.InstanceTypes, t)
			}
		}
		if len(cp.InstanceTypes) > 0 {
			out = append(out, &cp)
		}
	}
	return out
}
