package scheduling

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// buildTopology creates the groups every class needs, counts the pods that
// already run, and ranks classes into tiers.
func (s *solver) buildTopology() {
	s.topo = newTopology(s.in.Namespaces)
	for _, c := range s.classes {
		if c.err == nil {
			if err := s.classTerms(c); err != nil {
				c.err = err
			}
		}
	}
	// Existing pods' required anti-affinity repels pending pods.
	type ownedBy struct {
		b   *bin
		gid int32
	}
	var owned []ownedBy
	for _, b := range s.nodes {
		for _, p := range b.deriv.anti {
			for i := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				term := &p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
				g, err := s.topo.podAffinityGroup(kindAnti, p, term)
				if err != nil {
					continue
				}
				g.hasOwners = true
				owned = append(owned, ownedBy{b, g.id})
			}
		}
	}
	for _, c := range s.classes {
		for _, gid := range c.ownsAnti {
			s.topo.groups[gid].hasOwners = true
		}
	}
	for _, g := range s.topo.groups {
		if g.kind == kindSpread && g.key != LabelHostname {
			g.domains = s.spreadDomains(g)
		}
	}
	for _, c := range s.classes {
		for _, g := range s.topo.groups {
			if s.topo.selects(g, c.rep.Namespace, c.rep.Labels) {
				c.matches = append(c.matches, g.id)
			}
		}
	}
	// Count pods already running.
	for _, g := range s.topo.groups {
		key := podFilterKey(g)
		selects := func(p *corev1.Pod) bool { return s.topo.selects(g, p.Namespace, p.Labels) }
		for _, b := range s.nodes {
			if !g.passes(b) {
				continue
			}
			n := b.deriv.countSelected(key, b.node.Pods, selects)
			if n == 0 {
				continue
			}
			bc := b.topo[g.id]
			if bc == nil {
				bc = &binCount{}
				b.topo[g.id] = bc
			}
			bc.match += n
			g.recordDomains(b.reqs.Get(g.key), n, 0)
		}
	}
	for _, o := range owned {
		bc := o.b.topo[o.gid]
		if bc == nil {
			bc = &binCount{}
			o.b.topo[o.gid] = bc
		}
		bc.owner++
		s.topo.groups[o.gid].recordDomains(o.b.reqs.Get(s.topo.groups[o.gid].key), 0, 1)
	}
	for _, c := range s.classes {
		c.buildLevel0(s.opts.PreferencePolicy)
		c.tier = 2
		l0 := c.level0
		if len(l0.spreads) > 0 || len(l0.affinity) > 0 || len(l0.antiAffinity) > 0 {
			c.tier = 1
		}
		for _, t := range l0.antiAffinity {
			if s.topo.selects(s.topo.groups[t.group], c.rep.Namespace, c.rep.Labels) {
				c.tier = 0
			}
		}
	}
}

// classTerms resolves the class's spread and pod (anti-)affinity terms to
// groups.
func (s *solver) classTerms(c *podClass) error {
	p := c.rep
	for i := range p.Spec.TopologySpreadConstraints {
		tsc := &p.Spec.TopologySpreadConstraints[i]
		sel, err := selectorFor(tsc.LabelSelector, p.Labels, tsc.MatchLabelKeys, nil)
		if err != nil {
			return fmt.Errorf("topology spread %d: %w", i, err)
		}
		g := &topoGroup{kind: kindSpread, key: NormalizeKey(tsc.TopologyKey), sel: sel, nsNames: map[string]bool{p.Namespace: true},
			maxSkew: tsc.MaxSkew}
		if tsc.MinDomains != nil {
			g.minDomain = *tsc.MinDomains
		}
		filterKey := ""
		if tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
			f := c.nodeSelector.Copy()
			if len(c.requiredTerms) > 0 {
				f = f.Intersect(c.requiredTerms[0])
			}
			g.filterReqs = f
			filterKey = "A:" + f.String()
		}
		if tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
			g.honorTaints = true
			g.filterTols = p.Spec.Tolerations
			tb, _ := json.Marshal(p.Spec.Tolerations)
			filterKey += "|T:" + string(tb)
		}
		g.desc = fmt.Sprintf("topology spread on %s of %q", g.key, sel.String())
		g = s.topo.group(g, filterKey)
		c.spreads = append(c.spreads, &spreadTerm{group: g.id, scheduleAnyway: tsc.WhenUnsatisfiable == corev1.ScheduleAnyway})
	}
	aff := p.Spec.Affinity
	if aff == nil {
		return nil
	}
	if pa := aff.PodAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			g, err := s.topo.podAffinityGroup(kindAffinity, p, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
			if err != nil {
				return fmt.Errorf("pod affinity: %w", err)
			}
			c.affinity = append(c.affinity, &podTerm{group: g.id, required: true})
		}
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			w := &pa.PreferredDuringSchedulingIgnoredDuringExecution[i]
			g, err := s.topo.podAffinityGroup(kindAffinity, p, &w.PodAffinityTerm)
			if err != nil {
				return fmt.Errorf("preferred pod affinity: %w", err)
			}
			c.affinity = append(c.affinity, &podTerm{group: g.id, weight: w.Weight})
		}
	}
	if pa := aff.PodAntiAffinity; pa != nil {
		for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
			g, err := s.topo.podAffinityGroup(kindAnti, p, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
			if err != nil {
				return fmt.Errorf("pod anti-affinity: %w", err)
			}
			c.antiAffinity = append(c.antiAffinity, &podTerm{group: g.id, required: true})
			c.ownsAnti = append(c.ownsAnti, g.id)
		}
		for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
			w := &pa.PreferredDuringSchedulingIgnoredDuringExecution[i]
			g, err := s.topo.podAffinityGroup(kindAnti, p, &w.PodAffinityTerm)
			if err != nil {
				return fmt.Errorf("preferred pod anti-affinity: %w", err)
			}
			c.antiAffinity = append(c.antiAffinity, &podTerm{group: g.id, weight: w.Weight})
		}
	}
	return nil
}

// spreadDomains lists the domains a spread group balances over: what the
// eligible NodePools can launch plus what eligible existing nodes carry.
func (s *solver) spreadDomains(g *topoGroup) []string {
	set := map[string]bool{}
	allowed := func(v string) bool {
		if g.filterReqs == nil {
			return true
		}
		return g.filterReqs.Get(g.key).Has(v)
	}
	for _, p := range s.pools {
		if g.honorTaints && untolerated(g.filterTols, p.np.Taints, false, nil) != nil {
			continue
		}
		if g.filterReqs != nil && s.compatWithPool(p, p.reqs, g.filterReqs) != nil {
			continue
		}
		for _, v := range s.poolDomains(p, g.key) {
			if allowed(v) {
				set[v] = true
			}
		}
	}
	for _, b := range s.nodes {
		if !g.passes(b) {
			continue
		}
		if r, ok := b.reqs[g.key]; ok && !r.IsComplement() && len(r.Values()) == 1 {
			set[r.Values()[0]] = true
		}
	}
	out := sortedKeys(set)
	sort.Strings(out)
	return out
}

// poolDomains lists the values of key a pool's NodeClaims can take.
func (s *solver) poolDomains(p *poolState, key string) []string {
	pr, has := p.reqs[key]
	set := map[string]bool{}
	f := newOfferFilter(p.reqs)
	for _, st := range p.types {
		switch key {
		case LabelZone, LabelCapacityType:
			for _, o := range st.offers {
				if !s.offeringOK(o, f) {
					continue
				}
				if key == LabelZone {
					set[o.Zone] = true
				} else {
					set[o.CapacityType] = true
				}
			}
		default:
			if r, ok := st.reqs[key]; ok && !r.IsComplement() {
				for _, v := range r.Values() {
					set[v] = true
				}
			}
		}
	}
	if has && !pr.IsComplement() {
		if len(set) == 0 {
			return pr.Values()
		}
	}
	var out []string
	for _, v := range sortedKeys(set) {
		if !has || pr.Has(v) {
			out = append(out, v)
		}
	}
	return out
}

// podFilterKey names which pods a group selects, as far as that depends on
// the pods alone: its label selector and namespaces. Empty when it also
// depends on the namespaces' labels (a namespace selector), which a node's
// cached counts cannot see change.
func podFilterKey(g *topoGroup) string {
	if g.nsSel != nil {
		return ""
	}
	ns := make([]string, 0, len(g.nsNames))
	for n, ok := range g.nsNames {
		if ok {
			ns = append(ns, n)
		}
	}
	sort.Strings(ns)
	// The selector's type tells Nothing from Everything, which both
	// print as "".
	return fmt.Sprintf("%T|%s|%s", g.sel, g.sel.String(), strings.Join(ns, ","))
}
