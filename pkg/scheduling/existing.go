package scheduling

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

func (s *solver) buildNodes() {
	for _, n := range s.in.Nodes {
		d := n.derived()
		b := &bin{existing: true, node: n, deriv: d, taints: n.Taints, alloc: s.ri.vec(n.Allocatable), topo: map[int32]*binCount{},
			used: make(vec, len(s.ri.names)), lenient: n.Requirements != nil, ignoreEphemeral: n.Managed && !n.Initialized,
			volumes: map[string]int{}}
		// Shared with every solve of a prepared node: an existing node's
		// requirements are only read.
		b.reqs, b.host = d.reqs, d.host
		if _, ok := n.Allocatable[corev1.ResourcePods]; !ok {
			b.alloc[resPods] = math.MaxInt32
		}
		for k, x := range d.used {
			if i, ok := s.ri.pos[k]; ok {
				b.used[i] += x
			}
		}
		b.used[resPods] += d.count
		b.ports = d.ports[:len(d.ports):len(d.ports)]
		for _, p := range n.Pods {
			if len(n.VolumeLimits) == 0 || len(p.Spec.Volumes) == 0 || finished(p) {
				continue
			}
			if s.vols == nil {
				s.vols = newVolumeIndex(s.in)
			}
			for d, k := range s.vols.drivers(p) {
				b.volumes[d] += k
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
