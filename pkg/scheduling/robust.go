package scheduling

import (
	"math"
	"sort"
)

// The kube-scheduler, not the solver, binds pods. It knows nothing of the
// plan: it hands each pod, in the order the pods arrive, to whichever node
// scores best at that moment. Pods that could go to any of a round's new
// nodes therefore end up mixed on every node in about the proportions in
// which they arrive, not in the proportions the solver packed them. A plan
// that puts memory-heavy pods on one shape of machine and cpu-heavy ones on
// another is cheapest on paper, but once the pods are mixed the cpu-lean
// machine fills its memory with a cpu-heavy remainder stranded, and the
// pods left over wait for a second provisioning round.
//
// harden guards against that (Options.Robust). For each NodePool it takes
// the new NodeClaims whose pods could trade places with one another and
// models them filled with the average pod of that mix: a machine with
// allocatable a holds min over resources of a[r]/avg[r] such pods. While
// the claims together hold fewer than their pods plus one per claim (a pod
// that almost fits is a pod that does not), it moves the claim whose next
// larger option buys the most average-pod room per dollar to that option,
// by dropping the cheaper options from its list. Pools where the pods
// cannot mix, or mix only one shape, are left alone.
func (s *solver) harden() {
	byPool := map[*poolState][]*bin{}
	for _, b := range s.claims {
		if len(b.pods) > 0 && s.mobileClaim(b) {
			byPool[b.pool] = append(byPool[b.pool], b)
		}
	}
	pools := make([]*poolState, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].idx < pools[j].idx })
	for _, p := range pools {
		s.hardenGroup(byPool[p])
	}
}

// mobileClaim reports whether every pod on b could equally go to any other
// NodeClaim of its pool: no topology, affinity, host ports or volumes, and
// only the resources every node has.
func (s *solver) mobileClaim(b *bin) bool {
	for _, pi := range b.pods {
		c := s.podClass[pi]
		if len(c.spreads) > 0 || len(c.affinity) > 0 || len(c.antiAffinity) > 0 || len(c.matches) > 0 ||
			len(c.ownsAnti) > 0 || len(c.ports) > 0 || len(c.volDrivers) > 0 || len(c.volumeReqs) > 0 {
			return false
		}
		for r := resPods + 1; r < len(c.reqs); r++ {
			if c.reqs[r] != 0 {
				return false
			}
		}
	}
	return true
}

func (s *solver) hardenGroup(group []*bin) {
	if len(group) < 2 {
		return
	}
	// Claims whose pods could not go to every other claim (a selector
	// narrowed one to arm64, another to a zone) are not one mix; take the
	// largest set that share one set of node requirements.
	sig := map[string][]*bin{}
	for _, b := range group {
		k := b.reqs.Copy()
		delete(k, LabelHostname)
		delete(k, LabelInstanceType)
		sig[k.String()] = append(sig[k.String()], b)
	}
	if len(sig) > 1 {
		return
	}
	var total [3]float64
	classes := map[*podClass]bool{}
	n := 0
	for _, b := range group {
		for _, pi := range b.pods {
			c := s.podClass[pi]
			classes[c] = true
			for r := 0; r < 3; r++ {
				total[r] += float64(c.reqs[r])
			}
			n++
		}
	}
	if len(classes) < 2 {
		return
	}
	var avg [3]float64
	for r := range avg {
		avg[r] = total[r] / float64(n)
	}
	held := map[*itState]float64{}
	holds := func(st *itState) float64 {
		if k, ok := held[st]; ok {
			return k
		}
		k := math.Inf(1)
		for r := 0; r < 3; r++ {
			if avg[r] > 0 {
				k = min(k, float64(st.alloc[r])/avg[r])
			}
		}
		held[st] = k
		return k
	}
	states := make([]*claimState, 0, len(group))
	room := 0.0
	for _, b := range group {
		f := newOfferFilter(b.reqs)
		cs := &claimState{b: b}
		for _, st := range b.options {
			if o := s.cheapestOffering(st, f); o != nil && o.ReservationID == "" {
				cs.opts = append(cs.opts, pricedOption{st, o.Price})
			}
		}
		if len(cs.opts) == 0 {
			return
		}
		sort.SliceStable(cs.opts, func(i, j int) bool { return cs.opts[i].price < cs.opts[j].price })
		room += holds(cs.opts[0].st)
		states = append(states, cs)
	}
	need := float64(n + len(group))
	if room >= need {
		return
	}
	// Each claim offers its best next step; a heap keeps the best offer
	// on top, so a claim's options are scanned only when it moves.
	h := &upgradeHeap{}
	for _, cs := range states {
		if u, ok := cs.bestStep(holds); ok {
			h.push(u)
		}
	}
	for room < need && len(*h) > 0 {
		u := h.pop()
		cs := u.cs
		room += holds(cs.opts[u.to].st) - holds(cs.opts[cs.cur].st)
		cs.cur = u.to
		if next, ok := cs.bestStep(holds); ok {
			h.push(next)
		}
	}
	for _, cs := range states {
		if cs.cur == 0 {
			continue
		}
		// Keep the chosen option and every option that holds at least as
		// much of the mix; the cheaper, leaner ones go.
		floor := holds(cs.opts[cs.cur].st)
		kept := cs.b.options[:0:0]
		for _, st := range cs.b.options {
			if holds(st) >= floor {
				kept = append(kept, st)
			}
		}
		if ok, _ := minValuesOK(cs.b.reqs, kept); !ok {
			continue
		}
		cs.b.options = kept
	}
}

// claimState is one NodeClaim while harden sizes it: its usable options by
// price and the one it is at.
type claimState struct {
	b    *bin
	opts []pricedOption
	cur  int
}

// pricedOption is an instance type with its cheapest offering for a claim.
type pricedOption struct {
	st    *itState
	price float64
}

// upgrade is moving claim cs to option to, gaining gain average pods of
// room per dollar.
type upgrade struct {
	cs   *claimState
	to   int
	gain float64
}

// bestStep is the option beyond the current one that adds the most room
// per dollar.
func (cs *claimState) bestStep(holds func(*itState) float64) (upgrade, bool) {
	have := holds(cs.opts[cs.cur].st)
	best := upgrade{cs: cs, to: -1}
	for j := cs.cur + 1; j < len(cs.opts); j++ {
		more := holds(cs.opts[j].st) - have
		if more <= 0 {
			continue
		}
		if gain := more / math.Max(cs.opts[j].price-cs.opts[cs.cur].price, 1e-9); gain > best.gain {
			best.to, best.gain = j, gain
		}
	}
	return best, best.to >= 0
}

// upgradeHeap is a max-heap of upgrades by gain.
type upgradeHeap []upgrade

func (h *upgradeHeap) push(u upgrade) {
	*h = append(*h, u)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if (*h)[p].gain >= (*h)[i].gain {
			break
		}
		(*h)[p], (*h)[i] = (*h)[i], (*h)[p]
		i = p
	}
}

func (h *upgradeHeap) pop() upgrade {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && (*h)[l].gain > (*h)[m].gain {
			m = l
		}
		if r < last && (*h)[r].gain > (*h)[m].gain {
			m = r
		}
		if m == i {
			break
		}
		(*h)[m], (*h)[i] = (*h)[i], (*h)[m]
		i = m
	}
	return top
}
