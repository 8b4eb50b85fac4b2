package scheduling

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
)

// newClaim opens a NodeClaim from pool p for pod pi, or says why not.
func (s *solver) newClaim(p *poolState, pi int, cl *classLevel, eff Requirements, ev *topoEval) *PlacementError {
	c := cl.class
	if r := s.poolStatic(p, cl); r != nil {
		return r
	}
	if p.nodesLeft == 0 {
		r := &PlacementError{Kind: RefusalLimitExceeded, Resource: ResourceNodes, Remaining: resource.NewQuantity(0, resource.DecimalSI),
			Needed: resource.NewQuantity(1, resource.DecimalSI)}
		if lim, ok := p.np.Limits[ResourceNodes]; ok {
			r.Limit, r.Used = quantity(lim), quantity(lim)
		}
		return r
	}
	if len(p.types) == 0 {
		return &PlacementError{Kind: RefusalNoOffering}
	}
	host := fmt.Sprintf("hostname-placeholder-%04d", len(s.claims))
	b := &bin{idx: len(s.claims), pool: p, host: host, topo: map[int32]*binCount{}, taints: p.np.Taints,
		used: make(vec, len(s.ri.names)), volumes: map[string]int{}}
	if h, _ := ev.checkHost(b); h != nil {
		return h.refusal()
	}
	if h, ok := eff[LabelHostname]; ok && !h.Has(host) {
		return &PlacementError{Kind: RefusalHostname, Key: LabelHostname, PodRequirement: &h,
			Detail: "requires " + h.String() + ", which a new node cannot have"}
	}
	reqs := p.reqs.Intersect(eff)
	if err := s.compatWithPool(p, p.reqs, eff); err != nil {
		return c.incompatible(err)
	}
	ce := s.compatibleTypes(p, reqs)
	compat := ce.types
	if len(compat) == 0 {
		return &PlacementError{Kind: RefusalNoInstanceType, Detail: "no instance type matches " + describeReqs(eff, p.reqs)}
	}
	need := c.reqs
	var fitting []*itState
	var limitedBy *itState
	for _, st := range compat {
		if !fits(need, nil, st.alloc) {
			continue
		}
		if !s.withinLimits(p, st) {
			if limitedBy == nil {
				limitedBy = st
			}
			continue
		}
		fitting = append(fitting, st)
	}
	if len(fitting) == 0 {
		if limitedBy != nil {
			return s.limitRefusal(p, limitedBy)
		}
		return &PlacementError{Kind: RefusalResources, Requests: c.requestList, DaemonSetOverhead: p.hasDaemons}
	}
	// fitting already matches reqs; pinning only changes the pinned keys.
	var pinKeys []string
	for _, pn := range ev.pins {
		pinKeys = append(pinKeys, pn.key)
	}
	first := func(r Requirements) *itState {
		f := newOfferFilter(r)
		for _, st := range fitting {
			if s.typeOK(st, r, pinKeys, f) {
				return st
			}
		}
		return nil
	}
	// Seed zone and capacity type from what the types offer, so that
	// topology counts, pinning and later narrowing work on finite sets.
	seeded := reqs.Copy()
	if r, ok := seeded[LabelZone]; !ok || r.IsComplement() {
		seeded.Add(Requirement{Key: LabelZone, values: ce.zones})
	}
	if r, ok := seeded[LabelCapacityType]; !ok || r.IsComplement() {
		seeded.Add(Requirement{Key: LabelCapacityType, values: ce.cts})
	}
	pinned, firstOpt := s.pinDomains(seeded, nil, ev, first)
	if firstOpt == nil {
		return &PlacementError{Kind: RefusalNoOffering, Detail: "no instance type offered in a domain the topology allows"}
	}
	opts := fitting
	changed := false
	for _, k := range pinKeys {
		if !seeded.Get(k).Equal(pinned.Get(k)) {
			changed = true
		}
	}
	reqs = pinned
	if changed {
		opts = s.filterOptions(fitting, need, reqs, pinKeys)
		for _, key := range []string{LabelZone, LabelCapacityType} {
			reqs[key] = Requirement{Key: key, MinValues: reqs.Get(key).MinValues, values: s.offerValues(opts, reqs, key)}
		}
	}
	if ok, why := minValuesOK(reqs, opts); !ok {
		if s.opts.MinValuesPolicy != MinValuesBestEffort {
			return why
		}
		b.minValuesRelaxed = true
	}
	reqs[LabelHostname] = NewRequirement(LabelHostname, OpIn, host)
	b.reqs = reqs
	b.options = opts
	b.initial = opts
	b.used = c.reqs.clone()
	b.ports = append(b.ports, c.ports...)
	b.pods = append(b.pods, pi)
	s.updateReserve(b)
	if p.nodesLeft > 0 {
		p.nodesLeft--
	}
	s.claims = append(s.claims, b)
	s.slack = append(s.slack, claimSlack{})
	s.updateMaxAlloc(b)
	s.record(b, c, 1)
	s.podBin[pi] = b
	return nil
}

// limitRefusal says which limit st, the cheapest instance type that would
// fit the pod, passes.
func (s *solver) limitRefusal(p *poolState, st *itState) *PlacementError {
	for i, lim := range p.limited {
		if !lim || st.capacity[i] <= p.remaining[i] {
			continue
		}
		// The headroom left after the NodeClaims this solve already planned.
		name := s.ri.names[i]
		left, needed := vecQuantity(i, p.remaining[i]), vecQuantity(i, st.capacity[i])
		r := &PlacementError{Kind: RefusalLimitExceeded, Resource: name, Remaining: left, Needed: needed}
		if l, ok := p.np.Limits[name]; ok {
			used := l.DeepCopy()
			used.Sub(*left)
			r.Limit, r.Used = quantity(l), &used
		}
		return r
	}
	return &PlacementError{Kind: RefusalLimitExceeded}
}

// vecQuantity converts a solver vector entry back to a quantity (cpu is
// kept in millicores).
func vecQuantity(i int, v int64) *resource.Quantity {
	switch i {
	case resCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI)
	case resMem:
		return resource.NewQuantity(v, resource.BinarySI)
	}
	return resource.NewQuantity(v, resource.DecimalSI)
}

// incompatible types a requirement conflict of the pod with a pool or node,
// as the volume's when a volume set the key.
func (c *podClass) incompatible(err error) *PlacementError {
	r := refusalOf(err)
	if claim, ok := c.volumeFrom[r.Key]; ok && r.Kind == RefusalRequirementMismatch {
		r.Kind, r.Volume = RefusalVolumeZone, claim
		r.Detail += " (from volume " + claim + ")"
	}
	return &r
}

// describeReqs shows the pod-side requirements that the pool does not
// already imply, which is what a user needs to see.
func describeReqs(eff, pool Requirements) string {
	var parts []string
	for _, k := range eff.Keys() {
		if pr, ok := pool[k]; ok && pr.Equal(eff[k]) {
			continue
		}
		parts = append(parts, eff[k].String())
	}
	if len(parts) == 0 {
		return "the nodepool's requirements"
	}
	return fmt.Sprint(parts)
}

// finalize turns a planned bin into the NodeClaim the caller will create.
func (s *solver) finalize(b *bin) *NewNodeClaim {
	reqs := b.reqs.Copy()
	delete(reqs, LabelHostname)
	type priced struct {
		st    *itState
		price float64
		off   *Offering
	}
	ps := make([]priced, 0, len(b.options))
	f := newOfferFilter(reqs)
	sorted := true
	for _, st := range b.options {
		o := st.cheapest
		if !s.offeringOK(o, f) {
			o = s.cheapestOffering(st, f)
		}
		if o != nil {
			if n := len(ps); n > 0 && (o.Price < ps[n-1].price || (o.Price == ps[n-1].price && st.it.Name < ps[n-1].st.it.Name)) {
				sorted = false
			}
			ps = append(ps, priced{st, o.Price, o})
		}
	}
	if !sorted {
		sort.SliceStable(ps, func(i, j int) bool {
			if ps[i].price != ps[j].price {
				return ps[i].price < ps[j].price
			}
			return ps[i].st.it.Name < ps[j].st.it.Name
		})
	}
	nc := &NewNodeClaim{NodePool: b.pool.np.Name, Hostname: b.host, Taints: b.pool.np.Taints,
		StartupTaints: b.pool.np.StartupTaints, MinValuesRelaxed: b.minValuesRelaxed}
	// Reserved capacity: the cheapest option on a reservation takes one unit
	// now, so no later NodeClaim can count on the same last unit.
	if len(ps) > 0 && ps[0].off.ReservationID != "" {
		id := ps[0].off.ReservationID
		s.resLeft[id]--
		nc.ReservationIDs = []string{id}
		reqs[LabelCapacityType] = NewRequirement(LabelCapacityType, OpIn, CapacityTypeReserved)
		reqs[LabelReservationID] = NewRequirement(LabelReservationID, OpIn, id)
		var kept []priced
		for _, p := range ps {
			for _, o := range p.st.offers {
				if o.ReservationID == id {
					kept = append(kept, priced{p.st, o.Price, o})
					break
				}
			}
		}
		ps = kept
	}
	truncated := ps
	if len(truncated) > s.opts.MaxInstanceTypes {
		truncated = truncated[:s.opts.MaxInstanceTypes]
		opts := make([]*itState, len(truncated))
		for i := range truncated {
			opts[i] = truncated[i].st
		}
		// Cutting the list must not break minValues; keep the full list if it
		// would (the caller can still launch, just with a longer list).
		if ok, _ := minValuesOK(reqs, opts); !ok {
			truncated = ps
		}
	}
	cts := map[string]bool{}
	f = newOfferFilter(reqs)
	picked := make([]bool, len(b.pool.byName))
	for _, p := range truncated {
		nc.InstanceTypes = append(nc.InstanceTypes, p.st.it)
		picked[p.st.nameRank] = true
		for _, o := range p.st.offers {
			if s.offeringOK(o, f) || (len(nc.ReservationIDs) > 0 && o.ReservationID == nc.ReservationIDs[0]) {
				cts[o.CapacityType] = true
			}
		}
	}
	// names in sorted order without sorting: walk the pool's name order
	names := make([]string, 0, len(truncated))
	for i, st := range b.pool.byName {
		if picked[i] {
			names = append(names, st.it.Name)
		}
	}
	it := Requirement{Key: LabelInstanceType, values: sortedUnique(names), MinValues: reqs.Get(LabelInstanceType).MinValues}
	reqs[LabelInstanceType] = it
	if len(cts) > 0 {
		ct := Requirement{Key: LabelCapacityType, values: sortedKeys(cts), MinValues: reqs.Get(LabelCapacityType).MinValues}
		reqs[LabelCapacityType] = ct
	}
	nc.Requirements = reqs
	if len(truncated) > 0 {
		nc.Price = truncated[0].price
	}
	total := b.used.clone()
	if len(truncated) > 0 {
		total.add(truncated[0].st.daemon)
	}
	nc.Requests = s.ri.list(total)
	nc.Labels = map[string]string{}
	for k, v := range reqs.labels(s.wellKnown) {
		// Keys that come from the instance types (say a provider's cpu
		// count label) are set on the node by the instance itself; only
		// keys the NodePool declares are ours to fill in.
		if b.pool.typeKeys[k] && !b.pool.np.Requirements.Has(k) && b.pool.np.Labels[k] == "" {
			continue
		}
		nc.Labels[k] = v
	}
	for k, v := range b.pool.np.Labels {
		nc.Labels[k] = v
	}
	nc.Labels[LabelNodePool] = b.pool.np.Name
	for _, pi := range b.pods {
		nc.Pods = append(nc.Pods, s.in.Pods[pi])
	}
	return nc
}

// lbHeap is a min-heap of deferred claims by (lower bound, creation order);
// usually only its top is ever probed, so a heap beats sorting.
type lbHeap []lbClaim

func (h lbHeap) less(i, j int) bool {
	if h[i].lb != h[j].lb {
		return h[i].lb < h[j].lb
	}
	return h[i].b.idx < h[j].b.idx
}

func (h lbHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h lbHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *lbHeap) pop() lbClaim {
	old := *h
	top := old[0]
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	if n > 0 {
		(*h).down(0)
	}
	return top
}
