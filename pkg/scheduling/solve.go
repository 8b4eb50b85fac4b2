package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// solver holds the state of one Solve call.
type solver struct {
	in   *Input
	opts Options
	ri   *resIndex

	pools  []*poolState
	nodes  []*bin // existing nodes, initialized first then by name
	claims []*bin // new NodeClaims in creation order

	classes  []*podClass
	podClass []*podClass
	podLevel []*classLevel
	podBin   []*bin
	podErrs  [][]PlacementError

	topo            *topology
	unavailable     map[OfferingKey]bool
	wellKnown       map[string]bool // default keys plus Input.WellKnownLabels
	resLeft         map[string]int
	hasPreferTaints bool

	compatCache map[string]*compatEntry
	vols        *volumeIndex
	daemons     []daemonInfo
	deferred    []*bin
	slack       []claimSlack
	extraRes    bool // resources beyond cpu, memory and pods are in play
	lbs         []lbClaim
}

// defaultMaxPods is the kubelet's default pod limit, assumed for instance
// types that do not state one.
const defaultMaxPods = 110

// daemonInfo is a DaemonSet reduced to what overhead accounting needs.
type daemonInfo struct {
	name string
	pod  *corev1.Pod
	reqs Requirements
	ok   bool
	vec  vec
}

type lbClaim struct {
	b  *bin
	lb float64
}

type poolState struct {
	idx        int
	np         *NodePool
	reqs       Requirements
	typeKeys   map[string]bool
	types      []*itState // usable types, by cheapest offering then name
	byName     []*itState // the same, by name
	limited    []bool
	remaining  vec
	nodesLeft  int // -1: unlimited
	hasDaemons bool
	staticErr  map[*classLevel]*PlacementError
}

type itState struct {
	it       *InstanceType
	reqs     Requirements
	alloc    vec // allocatable minus the DaemonSet overhead of this pool
	capacity vec
	daemon   vec
	offers   []*Offering
	price    float64
	cheapest *Offering // cheapest usable offering overall
	nameRank int       // position in poolState.byName
}

// bin is anything a pod can be placed on: an existing node or a NodeClaim
// being planned.
type bin struct {
	idx              int
	existing         bool
	node             *ExistingNode
	pool             *poolState
	host             string
	reqs             Requirements
	taints           []corev1.Taint
	used             vec
	alloc            vec        // existing nodes
	options          []*itState // NodeClaims: types that still fit every pod here
	maxAlloc         vec
	reserve          vec
	pods             []int
	topo             map[int32]*binCount
	ports            []hostPort
	lenient          bool // in-flight NodeClaim: undefined well-known keys pass
	ignoreEphemeral  bool
	minValuesRelaxed bool
	volumes          map[string]int
}

// Solve places the snapshot's pending pods. See the package documentation.
func Solve(in *Input) *Result {
	s := newSolver(in)
	s.run()
	if s.opts.Robust {
		s.harden()
	}
	return s.result()
}

// newSolver indexes in for a solve: resources, pools, nodes, pod classes
// and topology.
func newSolver(in *Input) *solver {
	s := &solver{in: in, opts: in.Options, unavailable: map[OfferingKey]bool{}, resLeft: map[string]int{}, compatCache: map[string]*compatEntry{},
		wellKnown: wellKnownSet(in.WellKnownLabels)}
	if s.opts.MaxInstanceTypes <= 0 {
		s.opts.MaxInstanceTypes = DefaultMaxInstanceTypes
	}
	for _, k := range in.Unavailable {
		s.unavailable[k] = true
	}
	s.buildResources()
	s.buildPools()
	s.buildNodes()
	s.buildClasses()
	s.buildTopology()
	return s
}

func (s *solver) buildResources() {
	ri := newResIndex()
	for _, p := range s.in.Pods {
		ri.addAll(PodRequests(p))
	}
	for _, np := range s.in.NodePools {
		for _, it := range np.InstanceTypes {
			ri.addAll(it.Capacity)
		}
	}
	s.ri = ri
	s.extraRes = len(ri.names) > 3
}

// daemonPods turns each DaemonSet into the pod it would run on a new node.
func (s *solver) daemonPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, ds := range s.in.DaemonSets {
		p := &corev1.Pod{}
		p.Namespace = ds.Namespace
		p.Labels = ds.Spec.Template.Labels
		p.Spec = *ds.Spec.Template.Spec.DeepCopy()
		out = append(out, p)
	}
	return out
}

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
			st.reqs = Requirements{}
			for k, r := range it.Requirements {
				r.Key = NormalizeKey(k)
				st.reqs.Add(r)
			}
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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

func (s *solver) buildNodes() {
	for _, n := range s.in.Nodes {
		b := &bin{existing: true, node: n, taints: n.Taints, alloc: s.ri.vec(n.Allocatable), topo: map[int32]*binCount{},
			used: make(vec, len(s.ri.names)), lenient: n.Requirements != nil, ignoreEphemeral: n.Managed && !n.Initialized,
			volumes: map[string]int{}}
		b.reqs = RequirementsFromLabels(n.Labels)
		for _, k := range n.Requirements.Keys() {
			b.reqs.Add(n.Requirements[k])
		}
		if h, ok := b.reqs[LabelHostname]; ok && len(h.Values()) == 1 {
			b.host = h.Values()[0]
		} else {
			b.host = n.Name
			b.reqs[LabelHostname] = NewRequirement(LabelHostname, OpIn, n.Name)
		}
		if _, ok := n.Allocatable[corev1.ResourcePods]; !ok {
			b.alloc[resPods] = math.MaxInt32
		}
		for _, p := range n.Pods {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			r := s.ri.vec(PodRequests(p))
			r[resPods] = 1
			b.used.add(r)
			b.ports = append(b.ports, podHostPorts(p)...)
			if len(n.VolumeLimits) > 0 && len(p.Spec.Volumes) > 0 {
				if s.vols == nil {
					s.vols = newVolumeIndex(s.in)
				}
				for d, k := range s.vols.drivers(p) {
					b.volumes[d] += k
				}
			}
		}
		if !n.Initialized {
			s.addMissingDaemons(b)
		}
		for _, t := range n.Taints {
			if t.Effect == corev1.TaintEffectPreferNoSchedule {
				s.hasPreferTaints = true
			}
		}
		s.nodes = append(s.nodes, b)
	}
	sort.SliceStable(s.nodes, func(i, j int) bool {
		a, b := s.nodes[i].node, s.nodes[j].node
		if a.Initialized != b.Initialized {
			return a.Initialized
		}
		return a.Name < b.Name
	})
	for i, b := range s.nodes {
		b.idx = i
	}
}

func (s *solver) buildClasses() {
	byKey := map[string]*podClass{}
	s.podClass = make([]*podClass, len(s.in.Pods))
	for i, p := range s.in.Pods {
		k := classKey(p)
		c, ok := byKey[k]
		if !ok {
			c = &podClass{id: len(s.classes), key: k, rep: p}
			rl := PodRequests(p)
			c.requestList = rl
			c.reqs = s.ri.vec(rl)
			c.reqs[resPods] = 1
			c.ports = podHostPorts(p)
			if err := c.parseNodeConstraints(p); err != nil {
				c.err = err
			} else if err := s.volumeRequirements(c, p); err != nil {
				c.err = err
			}
			byKey[k] = c
			s.classes = append(s.classes, c)
		}
		s.podClass[i] = c
	}
}

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

// placeOn puts pod pi on existing node b if it fits there at level cl.
func (s *solver) placeOn(b *bin, pi int, cl *classLevel) bool {
	c := cl.class
	if c.err != nil || cl.reqsErr != nil || cl.isDeadNode(b.idx) {
		return false
	}
	ev, err := s.topo.evaluate(cl)
	if err != nil {
		return false
	}
	eff := cl.reqs
	if len(ev.extra) > 0 {
		eff = cl.reqs.Intersect(ev.extra)
	}
	if _, ok := s.existingFits(b, cl, eff, ev); !ok {
		return false
	}
	s.commitExisting(b, pi, cl)
	return true
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
	// 2. NodeClaims already planned
	if s.placeOnClaim(pi, cl, eff, ev) {
		return nil
	}
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

// existingFits is existingReason without messages, cheapest checks first,
// for the hot path. perm reports a failure that cannot go away during this
// solve (resources only shrink, taints and labels do not change).
func (s *solver) existingFits(b *bin, cl *classLevel, eff Requirements, ev *topoEval) (perm bool, ok bool) {
	c := cl.class
	if !fits(b.used, c.reqs, b.alloc) {
		return true, false
	}
	var skip func(*corev1.Taint) bool
	if b.ignoreEphemeral {
		skip = ephemeralTaint
	}
	if len(b.taints) > 0 && untolerated(c.rep.Spec.Tolerations, b.taints, !cl.tolPrefer, skip) != nil {
		return true, false
	}
	for k, pr := range eff {
		nr, ok := b.reqs[k]
		if !ok {
			if pr.negative() || (b.lenient && s.wellKnown[k]) {
				continue
			}
			_, topo := ev.extra[k]
			return !topo, false
		}
		if !nr.Overlaps(pr) && !(nr.negative() && pr.negative()) {
			_, topo := ev.extra[k]
			return !topo, false
		}
	}
	if len(c.ports) > 0 && portsConflict(b.ports, c.ports) != nil {
		return true, false
	}
	if len(ev.host) > 0 {
		if h, p := ev.checkHost(b); h != nil {
			return p, false
		}
	}
	if len(c.volDrivers) > 0 {
		if d, _ := s.volumeLimitHit(b, c); d != "" {
			return true, false
		}
	}
	return false, true
}

// lenientKeys are the keys an existing bin may leave undefined: the
// well-known ones for in-flight NodeClaims (their instance type decides
// them), none for registered nodes.
func (s *solver) lenientKeys(b *bin) map[string]bool {
	if b.lenient {
		return s.wellKnown
	}
	return nil
}

// existingReason says why an existing node cannot take the pod (nil = it
// can).
func (s *solver) existingReason(b *bin, cl *classLevel, eff Requirements, ev *topoEval) *PlacementError {
	c := cl.class
	var skip func(*corev1.Taint) bool
	if b.ignoreEphemeral {
		skip = ephemeralTaint
	}
	if t := untolerated(c.rep.Spec.Tolerations, b.taints, !cl.tolPrefer, skip); t != nil {
		return &PlacementError{Kind: RefusalTaintNotTolerated, Taint: taintCopy(t)}
	}
	if err := b.reqs.compatible(eff, "node", s.lenientKeys(b)); err != nil {
		return c.incompatible(err)
	}
	if !fits(b.used, c.reqs, b.alloc) {
		name := corev1.ResourceName(s.ri.firstShort(b.used, c.reqs, b.alloc))
		r := &PlacementError{Kind: RefusalResources, Resource: name}
		if q, ok := c.requestList[name]; ok {
			r.Needed = quantity(q)
		}
		return r
	}
	if hp := portsConflict(b.ports, c.ports); hp != nil {
		return &PlacementError{Kind: RefusalHostPort, HostPort: hp.port, Protocol: string(hp.proto)}
	}
	if h, _ := ev.checkHost(b); h != nil {
		return h.refusal()
	}
	if d, lim := s.volumeLimitHit(b, c); d != "" {
		return &PlacementError{Kind: RefusalVolumeLimit, Driver: d, AttachLimit: lim}
	}
	return nil
}

func (s *solver) commitExisting(b *bin, pi int, cl *classLevel) {
	c := cl.class
	b.used.add(c.reqs)
	b.ports = append(b.ports, c.ports...)
	b.pods = append(b.pods, pi)
	s.addVolumes(b, c)
	s.record(b, c, 1)
	s.podBin[pi] = b
}

// record counts a placed pod of class c on b in every group that selects it
// and, for its required anti-affinity terms, as an owner.
func (s *solver) record(b *bin, c *podClass, n int32) {
	for _, gid := range c.matches {
		g := s.topo.groups[gid]
		if !g.passes(b) {
			continue
		}
		bc := b.topo[gid]
		if bc == nil {
			bc = &binCount{}
			b.topo[gid] = bc
		}
		bc.match += n
		g.recordDomains(b.reqs.Get(g.key), n, 0)
	}
	for _, gid := range c.ownsAnti {
		g := s.topo.groups[gid]
		bc := b.topo[gid]
		if bc == nil {
			bc = &binCount{}
			b.topo[gid] = bc
		}
		bc.owner += n
		g.recordDomains(b.reqs.Get(g.key), 0, n)
	}
}

// narrowed moves a bin's topology counts when its requirement on key shrinks.
func (s *solver) narrowed(b *bin, key string, old, now Requirement) {
	for gid, bc := range b.topo {
		g := s.topo.groups[gid]
		if g.key != key {
			continue
		}
		g.recordDomains(old, -bc.match, -bc.owner)
		g.recordDomains(now, bc.match, bc.owner)
	}
}

func (s *solver) result() *Result {
	res := &Result{Placements: make([]Placement, len(s.in.Pods))}
	claimIdx := map[*bin]int{}
	for _, b := range s.claims {
		nc := s.finalize(b)
		claimIdx[b] = len(res.NewNodeClaims)
		res.NewNodeClaims = append(res.NewNodeClaims, nc)
	}
	for i, p := range s.in.Pods {
		pl := Placement{Pod: p, NodeClaim: -1}
		if b := s.podBin[i]; b != nil {
			if b.existing {
				pl.Node = b.node.Name
			} else {
				pl.NodeClaim = claimIdx[b]
			}
			pl.Relaxed = s.podLevel[i].relaxed
		} else {
			pl.Errors = s.podErrs[i]
		}
		res.Placements[i] = pl
	}
	return res
}

// describeRequests prints the resources a pod asks for, sorted by name.
func describeRequests(l corev1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		q := l[corev1.ResourceName(k)]
		parts = append(parts, k+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

// describeTopology names the topology constraint that produced key's
// requirement.
func describeTopology(ev *topoEval, key string) string {
	return "topology (" + ev.extra[key].String() + ")"
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

// addMissingDaemons charges a starting node with the DaemonSet pods that
// will run there but are not bound yet, so pending pods do not take room
// the daemons are about to claim.
func (s *solver) addMissingDaemons(b *bin) {
	for _, d := range s.daemons {
		if !d.ok {
			continue
		}
		present := false
		for _, p := range b.node.Pods {
			for _, o := range p.OwnerReferences {
				if o.Kind == "DaemonSet" && o.Name == d.name && p.Namespace == d.pod.Namespace {
					present = true
				}
			}
		}
		if present {
			continue
		}
		var skip func(*corev1.Taint) bool
		if b.ignoreEphemeral {
			skip = ephemeralTaint
		}
		if untolerated(d.pod.Spec.Tolerations, b.taints, false, skip) != nil {
			continue
		}
		if b.reqs.compatible(d.reqs, "node", s.lenientKeys(b)) != nil {
			continue
		}
		b.used.add(d.vec)
	}
}
