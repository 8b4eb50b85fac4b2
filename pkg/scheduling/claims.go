package scheduling

import (
	"fmt"
	"math"
	"sort"
)

// probe is what adding a pod to a NodeClaim would do.
type probe struct {
	delta   Requirements // narrowed requirements on changed keys; nil: unchanged
	changed []string
	first   *itState // cheapest option that would remain
	cost    float64  // price increase of the cheapest option
}

// poolStatic checks what never changes for a class level and a pool:
// taints and the pod's own requirements against the pool's.
func (s *solver) poolStatic(p *poolState, cl *classLevel) *PlacementError {
	if r, ok := p.staticErr[cl]; ok {
		return r
	}
	c := cl.class
	var reason *PlacementError
	if t := untolerated(c.rep.Spec.Tolerations, p.np.Taints, !cl.tolPrefer, nil); t != nil {
		reason = &PlacementError{Kind: RefusalTaintNotTolerated, Taint: taintCopy(t)}
	} else if err := s.compatWithPool(p, p.reqs, cl.reqs); err != nil {
		reason = c.incompatible(err)
	}
	p.staticErr[cl] = reason
	return reason
}

// compatWithPool is Compatible where keys the pool's instance types define
// count as known.
func (s *solver) compatWithPool(p *poolState, node, pod Requirements) error {
	for _, k := range pod.Keys() {
		pr := pod[k]
		nr, ok := node[k]
		if !ok {
			if pr.negative() || s.wellKnown[k] || p.typeKeys[k] {
				continue
			}
			return undefinedLabel(k, pr, "NodePool")
		}
		if err := conflict(nr, pr, "NodePool"); err != nil {
			return err
		}
	}
	return nil
}

// probeClaim checks whether b can take a pod of cl with effective
// requirements eff. On failure it reports whether the failure is permanent
// for this bin and level; reasons are not built here because this is the hot
// path and the caller never shows them.
func (s *solver) probeClaim(b *bin, cl *classLevel, eff Requirements, ev *topoEval) (*probe, bool) {
	c := cl.class
	if r := s.poolStatic(b.pool, cl); r != nil {
		return nil, true
	}
	var delta Requirements
	for k, pr := range eff {
		nr, ok := b.reqs[k]
		if !ok {
			if !pr.negative() && !s.wellKnown[k] && !b.pool.typeKeys[k] {
				return nil, true
			}
			if delta == nil {
				delta = Requirements{}
			}
			delta[k] = pr
			continue
		}
		if !nr.Overlaps(pr) && !(nr.negative() && pr.negative()) {
			_, topo := ev.extra[k]
			return nil, !topo
		}
		if !subset(nr, pr) {
			if delta == nil {
				delta = Requirements{}
			}
			delta[k] = nr.Intersect(pr)
		}
	}
	if len(c.ports) > 0 && portsConflict(b.ports, c.ports) != nil {
		return nil, true
	}
	if len(ev.host) > 0 {
		if h, perm := ev.checkHost(b); h != nil {
			return nil, perm
		}
	}
	for _, pn := range ev.pins {
		if r, ok := b.reqs[pn.key]; !ok || r.Len() > 1 {
			if delta == nil {
				delta = Requirements{}
			}
			if _, ok := delta[pn.key]; !ok {
				delta[pn.key] = b.reqs.Get(pn.key)
			}
		}
	}
	used, add := b.used, c.reqs
	if delta == nil {
		for _, st := range b.options {
			if fits(used, add, st.alloc) {
				return &probe{first: st, cost: st.price - b.options[0].price}, false
			}
		}
		return nil, true
	}
	keys := sortedKeys(delta)
	first := func(d Requirements) *itState {
		f := newOverlayFilter(d, b.reqs)
		for _, st := range b.options {
			if fits(used, add, st.alloc) && s.typeOK(st, d, keys, &f) {
				return st
			}
		}
		return nil
	}
	delta, firstOpt := s.pinDomains(delta, b.reqs, ev, first)
	if firstOpt == nil {
		return nil, false
	}
	return &probe{delta: delta, changed: keys, first: firstOpt, cost: firstOpt.price - b.options[0].price}, false
}

// pinDomains narrows multi-valued topology keys to one domain (least loaded
// first), so that the pods placed are counted exactly. delta holds the
// requirements being changed over base; first finds the cheapest usable
// option under a delta.
func (s *solver) pinDomains(delta, base Requirements, ev *topoEval, first func(Requirements) *itState) (Requirements, *itState) {
	for _, pn := range ev.pins {
		r, ok := delta[pn.key]
		if !ok {
			r = base.Get(pn.key)
		}
		if r.IsComplement() || r.Len() <= 1 {
			continue
		}
		cands := append([]string(nil), r.Values()...)
		load := func(d string) int32 {
			var n int32
			for _, g := range pn.spread {
				n += g.exact[d]
			}
			return n
		}
		sort.SliceStable(cands, func(i, j int) bool { return load(cands[i]) < load(cands[j]) })
		chosen := false
		for _, d := range cands {
			trial := delta.Copy()
			trial[pn.key] = Requirement{Key: pn.key, MinValues: r.MinValues, values: []string{d}}
			if first(trial) != nil {
				delta, chosen = trial, true
				break
			}
		}
		if !chosen {
			return delta, nil
		}
	}
	return delta, first(delta)
}

// subset reports whether every value a allows is allowed by b (conservative:
// false when unsure).
func subset(a, b Requirement) bool {
	if !b.IsComplement() || b.hasGT || b.hasLT || len(b.values) > 0 {
		if a.IsComplement() {
			return false
		}
		for _, v := range a.values {
			if !b.Has(v) {
				return false
			}
		}
		return true
	}
	return true // b is Exists
}

// maxDeferred bounds how many claims that would have to grow are priced per
// pod; beyond it the gain in packing is not worth a scan of every claim's
// options.
const maxDeferred = 128

// placeOnClaim puts the pod on the planned NodeClaim whose cheapest option
// grows the least; the first one that needs no growth wins outright.
// Claims that cannot take the pod for a lasting reason are marked dead for
// the pod's class level, so identical pods skip them.
func (s *solver) placeOnClaim(pi int, cl *classLevel, eff Requirements, ev *topoEval, wasteful bool) bool {
	c := cl.class
	s.skippedGrowth = false
	for attempt := 0; attempt < 3; attempt++ {
		var best *bin
		var bestPr *probe
		bestCost := math.Inf(1)
		deferred := s.deferred[:0]
		for i := range s.slack {
			if cl.isDead(i) {
				continue
			}
			sl := &s.slack[i]
			b := s.claims[i]
			if !s.quickFit(&sl.most, c) || (s.extraRes && !fits(b.used, c.reqs, b.maxAlloc)) {
				cl.markDead(i)
				continue
			}
			if !s.quickFit(&sl.first, c) {
				if !wasteful && cl.isWasteful(i) {
					// It would grow, and growing it was found wasteful.
					s.skippedGrowth = true
					continue
				}
				deferred = append(deferred, b)
				continue
			}
			pr, perm := s.probeClaim(b, cl, eff, ev)
			if pr == nil {
				if perm {
					cl.markDead(i)
				}
				continue
			}
			if pr.cost <= 0 {
				best, bestPr, bestCost = b, pr, 0
				break
			}
			if !wasteful && cl.isWasteful(i) {
				s.skippedGrowth = true
				continue
			}
			if pr.cost < bestCost {
				best, bestPr, bestCost = b, pr, pr.cost
			}
		}
		if best == nil || bestCost > 0 {
			// The cheapest option that merely has room is a lower bound on
			// what a deferred claim would cost; try them cheapest first and
			// stop once the bound cannot beat the best found.
			// Price them in chunks, oldest first: a later chunk is only looked
			// at when no claim of the earlier ones can take the pod at all.
			for start := 0; start < len(deferred) && (best == nil || start == 0); start += maxDeferred {
				chunk := deferred[start:min(start+maxDeferred, len(deferred))]
				cands := s.lbs[:0]
				for _, b := range chunk {
					for _, st := range b.options {
						if fits(b.used, c.reqs, st.alloc) {
							if lb := st.price - b.options[0].price; lb < bestCost {
								cands = append(cands, lbClaim{b, lb})
							}
							break
						}
					}
				}
				h := lbHeap(cands)
				h.init()
				for len(h) > 0 {
					lc := h.pop()
					if lc.lb >= bestCost {
						break
					}
					b := lc.b
					pr, perm := s.probeClaim(b, cl, eff, ev)
					if pr == nil {
						if perm {
							cl.markDead(b.idx)
						}
						continue
					}
					if pr.cost < bestCost {
						best, bestPr, bestCost = b, pr, pr.cost
					}
				}
				s.lbs = cands[:0]
			}
		}
		s.deferred = deferred[:0]
		if best == nil {
			return false
		}
		if bestCost > 0 && !wasteful && wastefulGrowth(best, c.reqs) {
			// A new NodeClaim holds the pod for less than this one grown;
			// look for another. The NodeClaim's load only grows, so it stays
			// wasteful for the class; the caller comes back with wasteful
			// set when no new NodeClaim can be opened.
			cl.markWasteful(best.idx)
			s.skippedGrowth = true
			attempt--
			continue
		}
		if s.commitClaim(best, pi, cl, bestPr) {
			return true
		}
		cl.markDead(best.idx)
	}
	return false
}

// growthTolerance is how much dearer per unit of its load than the best
// type of its pool a planned NodeClaim may become by growing. Growing within
// a family keeps that price (twice the machine for twice the money), and a
// NodeClaim that keeps growing means fewer nodes for the same pods, which is
// worth a small premium; but the few types bigger than a family's largest
// often cost more per cpu and GiB (the 96xlarge and network-optimized types,
// dearer still at spot prices), and a burst of memory-heavy pods that grew
// its NodeClaims onto them paid twice the price per GiB of two NodeClaims of
// the family's largest type.
const growthTolerance = 1.2

// wastefulGrowth reports whether growing b to take a pod adding add would
// leave it no option that prices its load within growthTolerance of the
// best type it was opened with. An option's price per unit of load is its
// price divided by how many times the load (b's pods and the new one) fits
// it, so cpu-heavy and memory-heavy loads are each priced by what binds
// them. The best is taken over types of every size, so a NodeClaim grows
// through a dear intermediate size while a good larger one still holds its
// load, and stops once only the premium sizes would.
func wastefulGrowth(b *bin, add vec) bool {
	best := math.Inf(1)
	for _, st := range b.initial {
		if f := loadFill(st.alloc, b.used, add); f > 0 && st.price > 0 {
			best = min(best, st.price/f)
		}
	}
	if math.IsInf(best, 1) {
		return false
	}
	for _, st := range b.options {
		if f := loadFill(st.alloc, b.used, add); f >= 1 && st.price/f <= growthTolerance*best {
			return false
		}
	}
	return true
}

// loadFill is how many times the load used+add fits alloc (fractional): the
// smallest ratio of allocatable to load over the resources loaded.
func loadFill(alloc, used, add vec) float64 {
	f := math.Inf(1)
	for i := range alloc {
		var l int64
		if i < len(used) {
			l += used[i]
		}
		if i < len(add) {
			l += add[i]
		}
		if l > 0 {
			f = min(f, float64(alloc[i])/float64(l))
		}
	}
	return f
}

// filterOptions keeps the options that fit need and match reqs on keys.
func (s *solver) filterOptions(opts []*itState, need vec, reqs Requirements, keys []string) []*itState {
	out := make([]*itState, 0, len(opts))
	f := newOfferFilter(reqs)
	for _, st := range opts {
		if !fits(need, nil, st.alloc) {
			continue
		}
		if len(keys) > 0 && !s.typeOK(st, reqs, keys, f) {
			continue
		}
		out = append(out, st)
	}
	return out
}

// minValuesOK checks every minValues of reqs against the options.
func minValuesOK(reqs Requirements, opts []*itState) (bool, *PlacementError) {
	for _, k := range reqs.Keys() {
		r := reqs[k]
		if r.MinValues <= 0 {
			continue
		}
		seen := map[string]bool{}
		for _, st := range opts {
			if k == LabelInstanceType {
				seen[st.it.Name] = true
				continue
			}
			tr, ok := st.reqs[k]
			if !ok || tr.IsComplement() {
				continue
			}
			for _, v := range tr.Values() {
				if r.Has(v) {
					seen[v] = true
				}
			}
		}
		if len(seen) < r.MinValues {
			return false, &PlacementError{Kind: RefusalMinValues, Key: k, MinValues: r.MinValues,
				Detail: fmt.Sprintf("minValues %d of %s not met (%d values left)", r.MinValues, k, len(seen))}
		}
	}
	return true, nil
}

// commitClaim applies a probe: narrows requirements, filters options,
// updates limits and topology counts.
func (s *solver) commitClaim(b *bin, pi int, cl *classLevel, pr *probe) bool {
	c := cl.class
	need := b.used.clone()
	need.add(c.reqs)
	reqs := b.reqs
	if pr.delta != nil {
		reqs = b.reqs.Copy()
		for k, v := range pr.delta {
			reqs[k] = v
		}
	}
	var opts []*itState
	if pr.delta == nil {
		// Only resources changed: compact in place (a claim's option slice
		// is never shared) instead of allocating a new one per pod.
		n := 0
		for _, st := range b.options {
			if fits(need, nil, st.alloc) {
				n++
			}
		}
		if n == 0 {
			return false
		}
		if n == len(b.options) {
			opts = b.options
		} else {
			opts = b.options[:0]
			for _, st := range b.options {
				if fits(need, nil, st.alloc) {
					opts = append(opts, st)
				}
			}
		}
	} else {
		opts = s.filterOptions(b.options, need, reqs, pr.changed)
		if len(opts) == 0 {
			return false
		}
	}
	relaxed := b.minValuesRelaxed
	if ok, _ := minValuesOK(reqs, opts); !ok {
		if s.opts.MinValuesPolicy != MinValuesBestEffort {
			return false
		}
		relaxed = true
	}
	b.minValuesRelaxed = relaxed
	if pr.delta != nil {
		for _, k := range pr.changed {
			old := b.reqs.Get(k)
			now := reqs.Get(k)
			if !old.Equal(now) {
				s.narrowed(b, k, old, now)
			}
		}
		b.reqs = reqs
	}
	b.options = opts
	b.used = need
	b.ports = append(b.ports, c.ports...)
	b.pods = append(b.pods, pi)
	s.updateMaxAlloc(b)
	s.updateReserve(b)
	s.record(b, c, 1)
	s.podBin[pi] = b
	return true
}

func (s *solver) updateMaxAlloc(b *bin) {
	m := make(vec, len(s.ri.names))
	for i := range m {
		m[i] = math.MinInt64
	}
	for _, st := range b.options {
		m.maxWith(st.alloc)
	}
	b.maxAlloc = m
	sl := &s.slack[b.idx]
	for i := 0; i < 3; i++ {
		sl.first[i] = b.options[0].alloc[i] - b.used[i]
		sl.most[i] = m[i] - b.used[i]
	}
}

// claimSlack is the room left on a NodeClaim in cpu, memory and pods, under
// its cheapest option and under its largest; kept in one contiguous slice so
// that the per-pod scan over all claims stays in cache.
type claimSlack struct {
	first, most [3]int64
}

func (s *solver) quickFit(room *[3]int64, c *podClass) bool {
	return c.reqs[0] <= room[0] && c.reqs[1] <= room[1] && c.reqs[2] <= room[2]
}

// updateReserve keeps the pool's limit headroom charged with the largest
// capacity the NodeClaim could still launch.
func (s *solver) updateReserve(b *bin) {
	p := b.pool
	r := make(vec, len(s.ri.names))
	for _, st := range b.options {
		r.maxWith(st.capacity)
	}
	if b.reserve != nil {
		p.remaining.add(b.reserve)
	}
	p.remaining.sub(r)
	b.reserve = r
}

func (s *solver) withinLimits(p *poolState, st *itState) bool {
	for i, lim := range p.limited {
		if lim && st.capacity[i] > p.remaining[i] {
			return false
		}
	}
	return true
}

type compatEntry struct {
	types      []*itState
	zones, cts []string // offered by any of types
}

// compatibleTypes lists the pool's types matching reqs (requirements and
// offerings, not resources), cached by requirement set.
func (s *solver) compatibleTypes(p *poolState, reqs Requirements) *compatEntry {
	key := fmt.Sprintf("%d|%s", p.idx, reqs.String())
	if v, ok := s.compatCache[key]; ok {
		return v
	}
	keys := reqs.Keys()
	f := newOfferFilter(reqs)
	ce := &compatEntry{}
	for _, st := range p.types {
		if s.typeOK(st, reqs, keys, f) {
			ce.types = append(ce.types, st)
		}
	}
	ce.zones = s.offerValues(ce.types, reqs, LabelZone)
	ce.cts = s.offerValues(ce.types, reqs, LabelCapacityType)
	s.compatCache[key] = ce
	return ce
}

// offerValues lists the zones or capacity types offered by types under reqs.
func (s *solver) offerValues(types []*itState, reqs Requirements, key string) []string {
	seen := map[string]bool{}
	f := newOfferFilter(reqs)
	for _, st := range types {
		for _, o := range st.offers {
			if s.offeringOK(o, f) {
				if key == LabelZone {
					seen[o.Zone] = true
				} else {
					seen[o.CapacityType] = true
				}
			}
		}
	}
	return sortedKeys(seen)
}
