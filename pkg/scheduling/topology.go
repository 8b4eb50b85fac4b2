package scheduling

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

type topoKind uint8

const (
	kindSpread topoKind = iota
	kindAffinity
	kindAnti
)

// topoGroup counts the pods selected by one topology term per domain of its
// key. The same group serves every pod carrying an identical term, and for
// anti-affinity it also records where the term's owners are, so that pods
// they repel stay away (the inverse direction).
type topoGroup struct {
	id        int32
	kind      topoKind
	key       string
	nsNames   map[string]bool
	nsSel     labels.Selector // nil: only nsNames
	sel       labels.Selector
	maxSkew   int32
	minDomain int32
	desc      string

	// spread only: which nodes count (node affinity / taint policies)
	filterReqs  Requirements
	filterTols  []corev1.Toleration
	honorTaints bool
	domains     []string // eligible domains (non-hostname keys)

	exact       map[string]int32 // matching pods on bins pinned to a domain
	totalExact  int32
	possible    map[string]int32 // matching pods on bins that may be in a domain
	possibleAll int32            // matching pods on bins unconstrained on key
	owner       map[string]int32 // anti-affinity owners that may be in a domain
	ownerAll    int32
	hasOwners   bool
}

type binCount struct{ match, owner int32 }

type topology struct {
	groups  []*topoGroup
	byKey   map[string]*topoGroup
	nsLabel map[string]labels.Set
}

func newTopology(namespaces []*corev1.Namespace) *topology {
	t := &topology{byKey: map[string]*topoGroup{}, nsLabel: map[string]labels.Set{}}
	for _, ns := range namespaces {
		t.nsLabel[ns.Name] = labels.Set(ns.Labels)
	}
	return t
}

func (t *topology) nsMatches(g *topoGroup, ns string) bool {
	if g.nsNames[ns] {
		return true
	}
	return g.nsSel != nil && g.nsSel.Matches(t.nsLabel[ns])
}

func (t *topology) selects(g *topoGroup, ns string, podLabels map[string]string) bool {
	return t.nsMatches(g, ns) && g.sel.Matches(labels.Set(podLabels))
}

// selectorFor converts an API selector, adding matchLabelKeys (key In the
// owner's value) and mismatchLabelKeys (key NotIn the owner's value).
func selectorFor(ls *metav1.LabelSelector, owner map[string]string, match, mismatch []string) (labels.Selector, error) {
	if ls == nil {
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	for _, k := range match {
		if v, ok := owner[k]; ok {
			r, err := labels.NewRequirement(k, "in", []string{v})
			if err != nil {
				return nil, err
			}
			sel = sel.Add(*r)
		}
	}
	for _, k := range mismatch {
		if v, ok := owner[k]; ok {
			r, err := labels.NewRequirement(k, "notin", []string{v})
			if err != nil {
				return nil, err
			}
			sel = sel.Add(*r)
		}
	}
	return sel, nil
}

// group returns the shared group for a term, creating it on first use.
func (t *topology) group(g *topoGroup, filterKey string) *topoGroup {
	nsNames := make([]string, 0, len(g.nsNames))
	for n := range g.nsNames {
		nsNames = append(nsNames, n)
	}
	sort.Strings(nsNames)
	nsSel := ""
	if g.nsSel != nil {
		nsSel = g.nsSel.String()
	}
	key := fmt.Sprintf("%d|%s|%s|%s|%s|%d|%d|%s", g.kind, g.key, strings.Join(nsNames, ","), nsSel, g.sel.String(), g.maxSkew, g.minDomain, filterKey)
	if old, ok := t.byKey[key]; ok {
		return old
	}
	g.id = int32(len(t.groups))
	g.exact, g.possible, g.owner = map[string]int32{}, map[string]int32{}, map[string]int32{}
	t.groups = append(t.groups, g)
	t.byKey[key] = g
	return g
}

// podAffinityGroup builds the group for a pod (anti-)affinity term.
func (t *topology) podAffinityGroup(kind topoKind, pod *corev1.Pod, term *corev1.PodAffinityTerm) (*topoGroup, error) {
	sel, err := selectorFor(term.LabelSelector, pod.Labels, term.MatchLabelKeys, term.MismatchLabelKeys)
	if err != nil {
		return nil, err
	}
	g := &topoGroup{kind: kind, key: NormalizeKey(term.TopologyKey), sel: sel, nsNames: map[string]bool{}}
	for _, n := range term.Namespaces {
		g.nsNames[n] = true
	}
	if term.NamespaceSelector != nil {
		ns, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
		if err != nil {
			return nil, err
		}
		g.nsSel = ns
	} else if len(term.Namespaces) == 0 {
		g.nsNames[pod.Namespace] = true
	}
	word := "affinity"
	if kind == kindAnti {
		word = "anti-affinity"
	}
	g.desc = fmt.Sprintf("pod %s to %q on %s", word, sel.String(), g.key)
	return t.group(g, ""), nil
}

// recordDomains adds dm matching pods and do owners to the domains a bin
// with requirement r on the group's key may be in.
func (g *topoGroup) recordDomains(r Requirement, dm, do int32) {
	if r.IsComplement() {
		g.possibleAll += dm
		g.ownerAll += do
		return
	}
	vals := r.Values()
	if len(vals) == 1 && dm != 0 {
		g.exact[vals[0]] += dm
		g.totalExact += dm
	}
	for _, v := range vals {
		if dm != 0 {
			g.possible[v] += dm
		}
		if do != 0 {
			g.owner[v] += do
		}
	}
}

// passes reports whether a bin counts for a spread group's owner.
func (g *topoGroup) passes(b *bin) bool {
	if g.kind != kindSpread {
		return true
	}
	if g.filterReqs != nil && !requirementsOverlap(b.reqs, g.filterReqs) {
		return false
	}
	if g.honorTaints && untolerated(g.filterTols, b.taints, false, nil) != nil {
		return false
	}
	return true
}

// requirementsOverlap is Intersects without building an error.
func requirementsOverlap(a, b Requirements) bool {
	for k, x := range b {
		y, ok := a[k]
		if !ok {
			continue
		}
		if !x.Overlaps(y) && !(x.negative() && y.negative()) {
			return false
		}
	}
	return true
}

// hostCheck is a per-bin topology test for hostname-keyed groups.
type hostCheck struct {
	g    *topoGroup
	kind topoKind
	self bool
	// inverse: the pod is repelled by owners of g rather than owning g
	inverse bool
}

// topoEval is the result of evaluating a pod's topology against the
// current counts: extra requirements for non-hostname keys, per-bin checks
// for hostname keys, and keys whose domain must be pinned to one value.
type topoEval struct {
	extra Requirements
	host  []hostCheck
	pins  []pin
}

type pin struct {
	key    string
	spread []*topoGroup // choose the least-loaded domain of these
}

// evaluate computes the topology view for one pod of level cl.
func (t *topology) evaluate(cl *classLevel) (*topoEval, error) {
	c := cl.class
	ev := &topoEval{}
	addReq := func(r Requirement) {
		if ev.extra == nil {
			ev.extra = Requirements{}
		}
		ev.extra.Add(r)
	}
	pinKey := func(key string, g *topoGroup) {
		for i := range ev.pins {
			if ev.pins[i].key == key {
				if g != nil {
					ev.pins[i].spread = append(ev.pins[i].spread, g)
				}
				return
			}
		}
		p := pin{key: key}
		if g != nil {
			p.spread = []*topoGroup{g}
		}
		ev.pins = append(ev.pins, p)
	}
	self := func(g *topoGroup) bool { return t.selects(g, c.rep.Namespace, c.rep.Labels) }

	for _, s := range cl.spreads {
		g := t.groups[s.group]
		sf := self(g)
		if g.key == LabelHostname {
			ev.host = append(ev.host, hostCheck{g: g, kind: kindSpread, self: sf})
			continue
		}
		minCount := int32(-1)
		for _, d := range g.domains {
			if n := g.exact[d]; minCount < 0 || n < minCount {
				minCount = n
			}
		}
		if minCount < 0 || (g.minDomain > 0 && int32(len(g.domains)) < g.minDomain) {
			minCount = 0
		}
		var allowed []string
		for _, d := range g.domains {
			n := g.exact[d]
			if sf {
				n++
			}
			if n-minCount <= g.maxSkew {
				allowed = append(allowed, d)
			}
		}
		if len(allowed) == 0 {
			return nil, refuse(PlacementError{Kind: RefusalTopology, Key: g.key,
				Detail: fmt.Sprintf("topology spread on %s (maxSkew %d) has no domain left", g.key, g.maxSkew)})
		}
		addReq(Requirement{Key: g.key, values: allowed})
		pinKey(g.key, g)
	}
	for _, term := range cl.affinity {
		g := t.groups[term.group]
		sf := self(g)
		if g.key == LabelHostname {
			ev.host = append(ev.host, hostCheck{g: g, kind: kindAffinity, self: sf})
			continue
		}
		var allowed []string
		for d, n := range g.exact {
			if n > 0 {
				allowed = append(allowed, d)
			}
		}
		sort.Strings(allowed)
		if len(allowed) == 0 {
			if !sf {
				return nil, refuse(PlacementError{Kind: RefusalAffinity, Key: g.key, Detail: g.desc + ": no matching pod is scheduled yet"})
			}
		} else {
			addReq(Requirement{Key: g.key, values: allowed})
		}
		pinKey(g.key, nil)
	}
	for _, term := range cl.antiAffinity {
		g := t.groups[term.group]
		if g.key == LabelHostname {
			ev.host = append(ev.host, hostCheck{g: g, kind: kindAnti})
			continue
		}
		if g.possibleAll > 0 {
			return nil, refuse(PlacementError{Kind: RefusalAffinity, Key: g.key, Detail: g.desc + ": a matching pod may be in every domain"})
		}
		if blocked := positive(g.possible); len(blocked) > 0 {
			addReq(Requirement{Key: g.key, complement: true, values: blocked})
		}
		// Pin the domain: otherwise the pod would block every domain its
		// NodeClaim might still land in.
		pinKey(g.key, nil)
	}
	for _, gid := range c.matches {
		g := t.groups[gid]
		if g.kind != kindAnti || !g.hasOwners {
			continue
		}
		if g.key == LabelHostname {
			ev.host = append(ev.host, hostCheck{g: g, kind: kindAnti, inverse: true})
			continue
		}
		if g.ownerAll > 0 {
			return nil, refuse(PlacementError{Kind: RefusalAffinity, Key: g.key, Detail: "a pod with " + g.desc + " may be in every domain"})
		}
		if blocked := positive(g.owner); len(blocked) > 0 {
			addReq(Requirement{Key: g.key, complement: true, values: blocked})
		}
	}
	return ev, nil
}

func positive(m map[string]int32) []string {
	var out []string
	for d, n := range m {
		if n > 0 {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// checkHost runs the hostname checks against one bin. It returns the check
// that fails (nil when all pass) and whether the failure is permanent for
// this bin (counts only grow). The reason is built only when asked for
// (hostRefusal): this runs on the hot path.
func (ev *topoEval) checkHost(b *bin) (*hostCheck, bool) {
	for i := range ev.host {
		h := &ev.host[i]
		g := h.g
		switch {
		case h.inverse:
			if g.owner[b.host] > 0 {
				return h, true
			}
		case h.kind == kindSpread:
			n := g.exact[b.host]
			if h.self {
				n++
			}
			if n > g.maxSkew {
				return h, true
			}
		case h.kind == kindAffinity:
			if g.exact[b.host] == 0 && !(h.self && g.totalExact == 0) {
				return h, false
			}
		case h.kind == kindAnti:
			if g.possible[b.host] > 0 {
				return h, true
			}
		}
	}
	return nil, false
}

// refusal says why the failing hostname check h refuses a bin.
func (h *hostCheck) refusal() *PlacementError {
	g := h.g
	r := &PlacementError{Kind: RefusalAffinity, Key: g.key}
	switch {
	case h.inverse:
		r.Detail = "a pod there has " + g.desc
	case h.kind == kindSpread:
		r.Kind = RefusalTopology
		r.Detail = fmt.Sprintf("topology spread on %s (maxSkew %d) would be exceeded", g.key, g.maxSkew)
	case h.kind == kindAffinity:
		r.Detail = g.desc + " not satisfied"
	default:
		r.Detail = g.desc + " violated"
	}
	return r
}
