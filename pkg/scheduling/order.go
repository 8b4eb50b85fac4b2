package scheduling

import (
	"fmt"
	"sort"
)

func (s *solver) run() {
	n := len(s.in.Pods)
	s.podLevel = make([]*classLevel, n)
	s.podBin = make([]*bin, n)
	s.podErrs = make([][]PlacementError, n)
	order := make([]int, n)
	for i := range order {
		order[i] = i
		s.podLevel[i] = s.podClass[i].level0
	}
	// Size is the dominant resource measured against the catalogue's typical
	// memory per cpu, so that cpu-heavy and memory-heavy pods interleave and
	// each NodeClaim ends with a balanced mix instead of one being cpu-bound
	// and the next memory-bound.
	ratio := s.memPerCPU()
	for _, c := range s.classes {
		c.size = max(float64(c.reqs[resCPU]), float64(c.reqs[resMem])/ratio)
	}
	rank := make([]int, len(s.classes))
	byKey := append([]*podClass(nil), s.classes...)
	sort.Slice(byKey, func(i, j int) bool { return byKey[i].key < byKey[j].key })
	for i, c := range byKey {
		rank[c.id] = i
	}
	pods := s.in.Pods
	sort.SliceStable(order, func(i, j int) bool {
		a, b := s.podClass[order[i]], s.podClass[order[j]]
		if a.tier != b.tier {
			return a.tier < b.tier
		}
		if a.size != b.size {
			return a.size > b.size
		}
		if a.reqs[resCPU] != b.reqs[resCPU] {
			return a.reqs[resCPU] > b.reqs[resCPU]
		}
		if a.reqs[resMem] != b.reqs[resMem] {
			return a.reqs[resMem] > b.reqs[resMem]
		}
		if a != b {
			return rank[a.id] < rank[b.id]
		}
		pa, pb := pods[order[i]], pods[order[j]]
		if pa.Namespace != pb.Namespace {
			return pa.Namespace < pb.Namespace
		}
		if pa.Name != pb.Name {
			return pa.Name < pb.Name
		}
		return pa.UID < pb.UID
	})
	queue := s.interleave(s.placeNominated(order), ratio)
	for len(queue) > 0 {
		var failed []int
		for _, pi := range queue {
			if !s.trySchedule(pi) {
				failed = append(failed, pi)
			}
		}
		if len(failed) == len(queue) {
			break
		}
		queue = failed
	}
}

// placeNominated places the nominated pods on their nodes, in order, and
// returns the pods still to place. A nominated pod that no longer fits its
// node (another pod took the room, a taint appeared) is placed as usual.
func (s *solver) placeNominated(order []int) []int {
	if len(s.in.Nominations) == 0 {
		return order
	}
	byName := make(map[string]*bin, len(s.nodes))
	for _, b := range s.nodes {
		byName[b.node.Name] = b
	}
	rest := make([]int, 0, len(order))
	for _, pi := range order {
		b := byName[s.in.Nominations[s.in.Pods[pi].UID]]
		if b == nil || !s.placeOn(b, pi, s.podLevel[pi]) {
			rest = append(rest, pi)
		}
	}
	return rest
}

func (s *solver) trySchedule(pi int) bool {
	for {
		cl := s.podLevel[pi]
		errs := s.place(pi, cl)
		if errs == nil {
			s.podErrs[pi] = nil
			return true
		}
		s.podErrs[pi] = errs
		next := cl.relax(s.hasPreferTaints)
		if next == nil {
			return false
		}
		s.podLevel[pi] = next
	}
}

// place tries to put pod pi (at level cl) somewhere; nil errors mean done.
func (s *solver) place(pi int, cl *classLevel) []PlacementError {
	c := cl.class
	if c.err != nil {
		return s.samePerPool(refusalOf(c.err))
	}
	if cl.reqsErr != nil {
		return s.samePerPool(refusalOf(cl.reqsErr))
	}
	ev, err := s.topo.evaluate(cl)
	if err != nil {
		return s.samePerPool(refusalOf(err))
	}
	eff := cl.reqs
	if len(ev.extra) > 0 {
		eff = cl.reqs.Intersect(ev.extra)
		// A positive requirement emptied by topology (say zone In [a] with
		// zone a blocked by anti-affinity) cannot be met anywhere; without
		// this check the empty set would read as DoesNotExist.
		for _, k := range ev.extra.Keys() {
			if eff[k].isEmpty() && (!ev.extra[k].negative() || !cl.reqs.Get(k).negative()) {
				pod := cl.reqs.Get(k)
				return s.samePerPool(PlacementError{Kind: RefusalTopology, Key: k, PodRequirement: &pod,
					Detail: fmt.Sprintf("%s leaves no allowed domain for %s", describeTopology(ev, k), pod)})
			}
		}
	}
	var errs []PlacementError
	// 1. existing nodes, first fit
	for _, b := range s.nodes {
		if cl.isDeadNode(b.idx) {
			continue
		}
		perm, ok := s.existingFits(b, cl, eff, ev)
		if ok {
			s.commitExisting(b, pi, cl)
			return nil
		}
		if perm {
			cl.markDeadNode(b.idx)
		}
	}
	if len(s.nodes) > 0 {
		// Explain with the first node in order; only computed on failure.
		var first *PlacementError
		firstName := ""
		for _, b := range s.nodes {
			if r := s.existingReason(b, cl, eff, ev); r != nil {
				first, firstName = r, b.node.Name
				break
			}
		}
		errs = append(errs, rendered(existingRefusal(len(s.nodes), firstName, first)))
	}
	// 2. NodeClaims already planned; with CapGrowth, none that would have
	// to grow into a dearer kind of machine
	if s.placeOnClaim(pi, cl, eff, ev, !s.opts.CapGrowth) {
		return nil
	}
	skipped := s.skippedGrowth
	// 3. a new NodeClaim, pools by weight
	for _, p := range s.pools {
		r := s.newClaim(p, pi, cl, eff, ev)
		if r == nil {
			return nil
		}
		pe := *r
		pe.NodePool = p.np.Name
		errs = append(errs, rendered(pe))
	}
	// 4. no new NodeClaim can be opened (limits): grow one after all
	if skipped && s.placeOnClaim(pi, cl, eff, ev, true) {
		return nil
	}
	if len(s.pools) == 0 && len(errs) == 0 {
		errs = append(errs, rendered(PlacementError{Kind: RefusalNoCapacity}))
	}
	return errs
}

// samePerPool reports one refusal for every pool (or for the existing
// nodes when there is no pool): the pod itself is the problem.
func (s *solver) samePerPool(r PlacementError) []PlacementError {
	r = rendered(r)
	var out []PlacementError
	for _, p := range s.pools {
		pe := r
		pe.NodePool = p.np.Name
		out = append(out, pe)
	}
	if len(out) == 0 {
		out = append(out, r)
	}
	return out
}

// rendered fills in Reason from the refusal's fields.
func rendered(r PlacementError) PlacementError {
	r.Reason = r.Message()
	return r
}

// memPerCPU is the median memory bytes per millicore over all instance
// types (1 GiB per core when there are none).
func (s *solver) memPerCPU() float64 {
	var rs []float64
	for _, p := range s.pools {
		for _, st := range p.types {
			if st.alloc[resCPU] > 0 && st.alloc[resMem] > 0 {
				rs = append(rs, float64(st.alloc[resMem])/float64(st.alloc[resCPU]))
			}
		}
	}
	if len(rs) == 0 {
		return float64(1<<30) / 1000
	}
	sort.Float64s(rs)
	return rs[len(rs)/2]
}

// interleave reorders each tier of the size-sorted queue by merging its
// cpu-heavy, memory-heavy and pod-count-heavy pods so that the running
// totals stay balanced. NodeClaims fill roughly in queue order, so a
// balanced stream gives each one a mix that uses its cpu, memory and pod
// slots together, instead of one claim full of memory-heavy pods, the next
// full of cpu-heavy ones and a third stopped by the pod limit with most of
// its cpu idle.
func (s *solver) interleave(order []int, memRatio float64) []int {
	podRatio := s.podsPerCPU()
	share := func(c *podClass) [3]float64 {
		return [3]float64{float64(c.reqs[resCPU]), float64(c.reqs[resMem]) / memRatio, float64(c.reqs[resPods]) / podRatio}
	}
	out := make([]int, 0, len(order))
	for start := 0; start < len(order); {
		tier := s.podClass[order[start]].tier
		end := start
		var lists [3][]int
		for end < len(order) && s.podClass[order[end]].tier == tier {
			sh := share(s.podClass[order[end]])
			d := 0
			for i := 1; i < 3; i++ {
				if sh[i] > sh[d] {
					d = i
				}
			}
			lists[d] = append(lists[d], order[end])
			end++
		}
		// Pods limited by the pod count take the same slot whatever their
		// size; alternating large and small ones keeps every NodeClaim's
		// cpu and memory near the average instead of a few big and many
		// nearly idle ones.
		lists[2] = zigzag(lists[2])
		var sum [3]float64
		var next [3]int
		for n := end - start; n > 0; n-- {
			d := -1
			for i := 0; i < 3; i++ {
				if next[i] < len(lists[i]) && (d < 0 || sum[i] < sum[d]) {
					d = i
				}
			}
			pi := lists[d][next[d]]
			next[d]++
			sh := share(s.podClass[pi])
			for i := range sum {
				sum[i] += sh[i]
			}
			out = append(out, pi)
		}
		start = end
	}
	return out
}

// podsPerCPU is the pod slots per millicore of the largest instance type:
// on the big nodes that carry most pods, pod slots are the scarce resource
// tiny pods use up.
func (s *solver) podsPerCPU() float64 {
	var best *itState
	for _, p := range s.pools {
		for _, st := range p.types {
			if best == nil || st.alloc[resCPU] > best.alloc[resCPU] || (st.alloc[resCPU] == best.alloc[resCPU] && st.price < best.price) {
				best = st
			}
		}
	}
	if best == nil || best.alloc[resCPU] <= 0 || best.alloc[resPods] <= 0 {
		return 110.0 / 1000
	}
	return float64(best.alloc[resPods]) / float64(best.alloc[resCPU])
}

// zigzag returns xs as first, last, second, second-to-last, ...
func zigzag(xs []int) []int {
	out := make([]int, 0, len(xs))
	for i, j := 0, len(xs)-1; i <= j; i, j = i+1, j-1 {
		out = append(out, xs[i])
		if i != j {
			out = append(out, xs[j])
		}
	}
	return out
}
