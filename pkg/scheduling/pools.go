package scheduling

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

func (s *solver) buildPools() {
	nps := append([]*NodePool(nil), s.in.NodePools...)
	sort.SliceStable(nps, func(i, j int) bool {
		if nps[i].Weight != nps[j].Weight {
			return nps[i].Weight > nps[j].Weight
		}
		return nps[i].Name < nps[j].Name
	})
	daemons := s.daemonPods()
	var dinfo []daemonInfo
	for _, d := range daemons {
		c := &podClass{}
		err := c.parseNodeConstraints(d)
		r := c.nodeSelector
		if len(c.requiredTerms) > 0 {
			r = r.Intersect(c.requiredTerms[0])
		}
		v := s.ri.vec(PodRequests(d))
		v[resPods] = 1 // a daemon pod takes a pod slot too
		dinfo = append(dinfo, daemonInfo{pod: d, reqs: r, ok: err == nil, vec: v, name: s.in.DaemonSets[len(dinfo)].Name})
	}
	s.daemons = dinfo
	for i, np := range nps {
		p := &poolState{idx: i, np: np, typeKeys: map[string]bool{}, nodesLeft: -1,
			staticErr: map[*classLevel]*PlacementError{}}
		p.reqs = Requirements{}
		if np.Requirements != nil {
			p.reqs = np.Requirements.Copy()
		}
		for _, k := range sortedKeys(np.Labels) {
			p.reqs.Add(NewRequirement(k, OpIn, np.Labels[k]))
		}
		p.reqs.Add(NewRequirement(LabelNodePool, OpIn, np.Name))
		for _, t := range np.Taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				s.hasPreferTaints = true
			}
		}
		p.limited = make([]bool, len(s.ri.names))
		p.remaining = make(vec, len(s.ri.names))
		for name, q := range np.Remaining {
			if name == ResourceNodes {
				p.nodesLeft = int(max(q.Value(), 0))
				continue
			}
			if idx, ok := s.ri.pos[name]; ok {
				p.limited[idx] = true
				if idx == resCPU {
					p.remaining[idx] = q.MilliValue()
				} else {
					p.remaining[idx] = q.Value()
				}
			}
		}
		// daemonsets that would run on this pool's nodes
		var dsOK []int
		for j, d := range dinfo {
			if !d.ok || untolerated(d.pod.Spec.Tolerations, np.Taints, false, nil) != nil {
				continue
			}
			if p.reqs.compatible(d.reqs, "NodePool", s.wellKnown) != nil {
				continue
			}
			dsOK = append(dsOK, j)
			p.hasDaemons = true
		}
		for _, it := range np.InstanceTypes {
			st := &itState{it: it, capacity: s.ri.vec(it.Capacity)}
			var shared bool
			st.reqs, shared = typeRequirements(it)
			if _, ok := it.Capacity[corev1.ResourcePods]; !ok {
				st.capacity[resPods] = defaultMaxPods
			}
			alloc := st.capacity.clone()
			alloc.sub(s.ri.vec(it.Overhead))
			st.daemon = make(vec, len(s.ri.names))
			for _, j := range dsOK {
				if requirementsOverlap(st.reqs, dinfo[j].reqs) {
					st.daemon.add(dinfo[j].vec)
				}
			}
			alloc.sub(st.daemon)
			st.alloc = alloc
			st.price = math.Inf(1)
			for oi := range it.Offerings {
				o := &it.Offerings[oi]
				if !o.Available || s.unavailable[OfferingKey{it.Name, o.Zone, o.CapacityType}] {
					continue
				}
				if o.ReservationID != "" {
					s.resLeft[o.ReservationID] = o.ReservationCapacity
				}
				st.offers = append(st.offers, o)
				if st.cheapest == nil || o.Price < st.cheapest.Price || (o.Price == st.cheapest.Price && capRank(o.CapacityType) < capRank(st.cheapest.CapacityType)) {
					st.cheapest = o
				}
				st.price = min(st.price, o.Price)
			}
			if len(st.offers) == 0 {
				continue
			}
			// Types must agree with the pool's own requirements.
			if !requirementsOverlap(st.reqs, p.reqs) || !s.anyOffering(st, newOfferFilter(p.reqs)) {
				continue
			}
			if _, ok := st.reqs[LabelInstanceType]; !ok {
				if shared {
					st.reqs = st.reqs.Copy()
				}
				st.reqs[LabelInstanceType] = NewRequirement(LabelInstanceType, OpIn, it.Name)
			}
			for k := range st.reqs {
				p.typeKeys[k] = true
			}
			p.types = append(p.types, st)
		}
		p.typeKeys[LabelZone] = true
		p.typeKeys[LabelCapacityType] = true
		sort.SliceStable(p.types, func(a, b int) bool {
			if p.types[a].price != p.types[b].price {
				return p.types[a].price < p.types[b].price
			}
			return p.types[a].it.Name < p.types[b].it.Name
		})
		p.byName = append([]*itState(nil), p.types...)
		sort.SliceStable(p.byName, func(a, b int) bool { return p.byName[a].it.Name < p.byName[b].it.Name })
		for i, st := range p.byName {
			st.nameRank = i
		}
		s.pools = append(s.pools, p)
	}
}

// offerFilter is a NodeClaim's requirements pre-split for offering checks,
// built once per loop over instance types.
type offerFilter struct {
	zone, ct, rid          Requirement
	hasZone, hasCT, hasRID bool
	reqs                   Requirements
}

// newOverlayFilter reads each key from delta first, then base.
func newOverlayFilter(delta, base Requirements) offerFilter {
	f := *newOfferFilter(base)
	if z, ok := delta[LabelZone]; ok {
		f.zone, f.hasZone = z, true
	}
	if c, ok := delta[LabelCapacityType]; ok {
		f.ct, f.hasCT = c, true
	}
	if r, ok := delta[LabelReservationID]; ok {
		f.rid, f.hasRID = r, true
	}
	return f
}

func newOfferFilter(r Requirements) *offerFilter {
	f := &offerFilter{reqs: r}
	f.zone, f.hasZone = r[LabelZone]
	f.ct, f.hasCT = r[LabelCapacityType]
	f.rid, f.hasRID = r[LabelReservationID]
	return f
}

// offeringOK reports whether an offering can serve a NodeClaim.
func (s *solver) offeringOK(o *Offering, f *offerFilter) bool {
	if f.hasZone && !f.zone.Has(o.Zone) {
		return false
	}
	if f.hasCT && !f.ct.Has(o.CapacityType) {
		return false
	}
	if f.hasRID {
		if o.ReservationID == "" {
			if !f.rid.negative() && f.rid.Operator() != OpNotIn {
				return false
			}
		} else if !f.rid.Has(o.ReservationID) {
			return false
		}
	}
	if o.ReservationID != "" && s.resLeft[o.ReservationID] <= 0 {
		return false
	}
	if len(o.Requirements) > 0 && !requirementsOverlap(f.reqs, o.Requirements) {
		return false
	}
	return true
}

func (s *solver) anyOffering(st *itState, f *offerFilter) bool {
	for _, o := range st.offers {
		if s.offeringOK(o, f) {
			return true
		}
	}
	return false
}

// cheapestOffering returns the cheapest offering compatible with f, reserved
// offerings winning ties (they are already paid for).
func (s *solver) cheapestOffering(st *itState, f *offerFilter) *Offering {
	var best *Offering
	for _, o := range st.offers {
		if !s.offeringOK(o, f) {
			continue
		}
		if best == nil || o.Price < best.Price || (o.Price == best.Price && capRank(o.CapacityType) < capRank(best.CapacityType)) {
			best = o
		}
	}
	return best
}

func capRank(ct string) int {
	switch ct {
	case CapacityTypeReserved:
		return 0
	case CapacityTypeSpot:
		return 1
	}
	return 2
}

// typeOK checks an instance type against NodeClaim requirements on keys.
func (s *solver) typeOK(st *itState, r Requirements, keys []string, f *offerFilter) bool {
	for _, k := range keys {
		x, ok := r[k]
		if !ok {
			continue
		}
		y, ok := st.reqs[k]
		if !ok {
			continue
		}
		if !x.Overlaps(y) && !(x.negative() && y.negative()) {
			return false
		}
	}
	return s.anyOffering(st, f)
}

// typeRequirements are an instance type's requirements under normalized
// keys. When they already are (the providers' are), the type's own map is
// returned, shared: the solver only reads it, and building a copy of every
// type's requirements on every solve (the disruption simulator solves once
// per candidate) was a large share of the controller's garbage.
func typeRequirements(it *InstanceType) (reqs Requirements, shared bool) {
	normalized := true
	for k, r := range it.Requirements {
		if NormalizeKey(k) != k || r.Key != k {
			normalized = false
			break
		}
	}
	if normalized && it.Requirements != nil {
		return it.Requirements, true
	}
	reqs = make(Requirements, len(it.Requirements))
	for k, r := range it.Requirements {
		r.Key = NormalizeKey(k)
		reqs.Add(r)
	}
	return reqs, false
}
