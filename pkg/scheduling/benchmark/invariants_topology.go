package benchmark

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// domain is the value of a topology key on a host; "" means the plan leaves
// it undecided (a NodeClaim that may still land in several zones).
func domain(h *planHost, key string) string {
	if h.node != nil {
		if v, ok := h.node.Labels[key]; ok {
			return v
		}
		if key == corev1.LabelHostname {
			return h.name
		}
		return ""
	}
	if key == corev1.LabelHostname {
		return "nodeclaim/" + h.name
	}
	if v, ok := h.nc.Labels[key]; ok {
		return v
	}
	r := h.nc.Requirements.Get(key)
	if !r.IsComplement() && len(r.Values()) == 1 {
		return r.Values()[0]
	}
	return ""
}

// termMatches reports whether a pod-affinity term of a pod in namespace ns
// selects other.
func termMatches(term corev1.PodAffinityTerm, ns string, other *corev1.Pod) bool {
	switch {
	case term.NamespaceSelector != nil:
		// Namespace labels are not in the snapshot; treat the selector as
		// matching every namespace, the strictest reading.
	case len(term.Namespaces) > 0:
		found := false
		for _, n := range term.Namespaces {
			found = found || n == other.Namespace
		}
		if !found {
			return false
		}
	default:
		if other.Namespace != ns {
			return false
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(other.Labels))
}

type hostedPod struct {
	pod  *corev1.Pod
	host *planHost
	new  bool
}

func (c *checker) checkAntiAffinity() {
	var anti []hostedPod
	keys := map[string]bool{}
	for _, h := range c.hosts {
		for i, group := range [][]*corev1.Pod{h.old, h.new} {
			for _, p := range group {
				if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil &&
					len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
					anti = append(anti, hostedPod{p, h, i == 1})
					for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
						keys[t.TopologyKey] = true
					}
				}
			}
		}
	}
	if len(anti) == 0 {
		return
	}
	// index[key][domain] lists the pods in that domain.
	index := map[string]map[string][]hostedPod{}
	for key := range keys {
		m := map[string][]hostedPod{}
		for _, h := range c.hosts {
			d := domain(h, key)
			if d == "" {
				continue
			}
			for _, p := range h.old {
				m[d] = append(m[d], hostedPod{p, h, false})
			}
			for _, p := range h.new {
				m[d] = append(m[d], hostedPod{p, h, true})
			}
		}
		index[key] = m
	}
	for _, a := range anti {
		for _, t := range a.pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			d := domain(a.host, t.TopologyKey)
			if d == "" {
				if a.new {
					c.fail("pod %s has anti-affinity on %s but nodeclaim %s leaves it open",
						podName(a.pod), t.TopologyKey, a.host.name)
				}
				continue
			}
			for _, b := range index[t.TopologyKey][d] {
				if b.pod == a.pod || (!a.new && !b.new) {
					continue
				}
				if termMatches(t, a.pod.Namespace, b.pod) {
					c.fail("pods %s and %s share %s=%s against %s's anti-affinity",
						podName(a.pod), podName(b.pod), t.TopologyKey, d, podName(a.pod))
				}
			}
		}
	}
}

func (c *checker) checkZoneSpread() {
	type group struct {
		ns       string
		sel      labels.Selector
		maxSkew  int32
		newZones map[string]bool
	}
	groups := map[string]*group{}
	var order []string
	for _, h := range c.hosts {
		for _, p := range h.new {
			for _, tsc := range p.Spec.TopologySpreadConstraints {
				if tsc.TopologyKey != corev1.LabelTopologyZone || tsc.WhenUnsatisfiable != corev1.DoNotSchedule ||
					len(p.Spec.NodeSelector) > 0 {
					continue
				}
				sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
				if err != nil {
					c.fail("pod %s: bad spread selector: %v", podName(p), err)
					continue
				}
				id := fmt.Sprintf("%s|%s|%d", p.Namespace, sel.String(), tsc.MaxSkew)
				g := groups[id]
				if g == nil {
					g = &group{ns: p.Namespace, sel: sel, maxSkew: tsc.MaxSkew, newZones: map[string]bool{}}
					groups[id] = g
					order = append(order, id)
				}
				z := domain(h, corev1.LabelTopologyZone)
				if z == "" {
					c.fail("pod %s spreads over zones but nodeclaim %s leaves its zone open", podName(p), h.name)
					continue
				}
				g.newZones[z] = true
			}
		}
	}
	if len(groups) == 0 {
		return
	}
	zones := c.zoneDomains()
	// Every placed or bound pod with a decided zone, by namespace.
	type zonedPod struct {
		pod  *corev1.Pod
		zone string
	}
	byNS := map[string][]zonedPod{}
	for _, h := range c.hosts {
		z := domain(h, corev1.LabelTopologyZone)
		if z == "" {
			continue
		}
		for _, group := range [][]*corev1.Pod{h.old, h.new} {
			for _, p := range group {
				byNS[p.Namespace] = append(byNS[p.Namespace], zonedPod{p, z})
			}
		}
	}
	sort.Strings(order)
	for _, id := range order {
		g := groups[id]
		count := map[string]int{}
		for _, zp := range byNS[g.ns] {
			if g.sel.Matches(labels.Set(zp.pod.Labels)) {
				count[zp.zone]++
			}
		}
		least := math.MaxInt
		for _, z := range zones {
			least = min(least, count[z])
		}
		for _, z := range zones {
			if g.newZones[z] && count[z] > least+int(g.maxSkew) {
				c.fail("spread %s: zone %s has %d pods, the emptiest zone %d (maxSkew %d)",
					id, z, count[z], least, g.maxSkew)
			}
		}
	}
}

// zoneDomains are the zones a spread pod without node constraints could
// use: every zone of any pool's instance types and of any existing node.
func (c *checker) zoneDomains() []string {
	set := map[string]bool{}
	for _, n := range c.in.Nodes {
		if z, ok := n.Labels[corev1.LabelTopologyZone]; ok {
			set[z] = true
		}
	}
	for _, p := range c.in.NodePools {
		pz := p.Requirements.Get(scheduling.LabelZone)
		for _, it := range p.InstanceTypes {
			r := it.Requirements.Get(scheduling.LabelZone)
			if r.IsComplement() {
				continue
			}
			for _, z := range r.Values() {
				if pz.Has(z) {
					set[z] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for z := range set {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}
