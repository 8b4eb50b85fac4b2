package benchmark

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/scheduling/benchmark/workload"
)

// CheckPlan re-derives, independently of the solver, the hard guarantees a
// plan must keep, and returns one error per broken one (nil when the plan is
// sound). It checks:
//
//   - bookkeeping: one placement per pod in input order, placements and
//     NodeClaim pod lists agree, every unplaced pod has a reason;
//   - resources: no existing node that received pods is over-committed, and
//     every instance type a NodeClaim lists can hold its pods plus the
//     DaemonSets that would run there;
//   - launchability: each listed type matches the NodeClaim's requirements
//     and has an available offering in an allowed zone and capacity type;
//     the list is cheapest first and within Options.MaxInstanceTypes;
//   - taints of nodes and NodePools are tolerated; nodeSelectors hold on
//     every instance type the NodeClaim may become;
//   - NodePool limits hold whichever listed type is launched;
//   - required pod anti-affinity (any topology key), counting existing pods
//     both ways;
//   - zonal topology spread with DoNotSchedule: every zone that received a
//     new pod ends with at most min-zone-count + maxSkew matching pods, which
//     is what placing pods one at a time under the constraint implies.
//
// Not checked: required node affinity terms, pod affinity, host ports,
// volumes, hostname spread, and spread pods with a nodeSelector (their
// domains depend on nodeAffinityPolicy); the scale workload uses none.
func CheckPlan(in *scheduling.Input, res *scheduling.Result) []error {
	c := &checker{in: in, res: res}
	c.run()
	return c.errs
}

type checker struct {
	in    *scheduling.Input
	res   *scheduling.Result
	hosts []*planHost
	errs  []error
	// alloc caches instance type allocatable: NodeClaims share types.
	alloc map[*scheduling.InstanceType]corev1.ResourceList
}

func (c *checker) allocatable(it *scheduling.InstanceType) corev1.ResourceList {
	if a, ok := c.alloc[it]; ok {
		return a
	}
	if c.alloc == nil {
		c.alloc = map[*scheduling.InstanceType]corev1.ResourceList{}
	}
	a := allocatable(it)
	c.alloc[it] = a
	return a
}

// planHost is an existing node or a new NodeClaim with its pods.
type planHost struct {
	name     string
	node     *scheduling.ExistingNode
	nc       *scheduling.NewNodeClaim
	old, new []*corev1.Pod
}

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) run() {
	if len(c.res.Placements) != len(c.in.Pods) {
		c.fail("%d placements for %d pods", len(c.res.Placements), len(c.in.Pods))
		return
	}
	byName := map[string]*planHost{}
	for _, n := range c.in.Nodes {
		h := &planHost{name: n.Name, node: n, old: n.Pods}
		byName[n.Name] = h
		c.hosts = append(c.hosts, h)
	}
	ncHosts := make([]*planHost, len(c.res.NewNodeClaims))
	for i, nc := range c.res.NewNodeClaims {
		name := nc.Hostname
		if name == "" {
			name = fmt.Sprintf("nodeclaim[%d]", i)
		}
		ncHosts[i] = &planHost{name: name, nc: nc}
		c.hosts = append(c.hosts, ncHosts[i])
	}
	for i, p := range c.res.Placements {
		if p.Pod != c.in.Pods[i] {
			c.fail("placement %d is for pod %s, want %s", i, podName(p.Pod), podName(c.in.Pods[i]))
			continue
		}
		switch {
		case p.Node != "" && p.NodeClaim >= 0:
			c.fail("pod %s placed on node %s and nodeclaim %d", podName(p.Pod), p.Node, p.NodeClaim)
		case p.Node != "":
			h, ok := byName[p.Node]
			if !ok {
				c.fail("pod %s placed on unknown node %s", podName(p.Pod), p.Node)
				continue
			}
			h.new = append(h.new, p.Pod)
		case p.NodeClaim >= 0:
			if p.NodeClaim >= len(ncHosts) {
				c.fail("pod %s placed on nodeclaim %d of %d", podName(p.Pod), p.NodeClaim, len(ncHosts))
				continue
			}
			ncHosts[p.NodeClaim].new = append(ncHosts[p.NodeClaim].new, p.Pod)
		default:
			if len(p.Errors) == 0 {
				c.fail("pod %s is unplaced without a reason", podName(p.Pod))
			}
		}
	}
	pools := map[string]*scheduling.NodePool{}
	for _, p := range c.in.NodePools {
		pools[p.Name] = p
	}
	for _, h := range c.hosts {
		if h.node != nil {
			c.checkNode(h)
		} else {
			c.checkNodeClaim(h, pools[h.nc.NodePool])
		}
	}
	c.checkLimits(pools)
	c.checkAntiAffinity()
	c.checkZoneSpread()
}

func podName(p *corev1.Pod) string {
	if p == nil {
		return "<nil>"
	}
	return p.Namespace + "/" + p.Name
}

// sumRequests adds pod requests with workload.PodRequests (init containers,
// sidecars, overhead and the pod count included).
func sumRequests(d workload.Demand, pods ...*corev1.Pod) workload.Demand {
	if d == nil {
		d = workload.Demand{}
	}
	for _, p := range pods {
		for name, v := range workload.PodRequests(p) {
			d[name] += v
		}
	}
	return d
}

// overCommitted names the first resource (in name order) whose demand
// exceeds alloc. A resource absent from alloc has none, except the pod count,
// which some callers leave out.
func overCommitted(d workload.Demand, alloc corev1.ResourceList) (corev1.ResourceName, float64, float64, bool) {
	var (
		worst            corev1.ResourceName
		wantNeed, wantHv float64
		found            bool
	)
	for n, need := range d {
		q, ok := alloc[n]
		if !ok && n == corev1.ResourcePods {
			continue
		}
		have := 0.0
		if ok {
			have = q.AsApproximateFloat64()
		}
		if need > have*(1+1e-9)+1e-9 && (!found || n < worst) {
			worst, wantNeed, wantHv, found = n, need, have, true
		}
	}
	return worst, wantNeed, wantHv, found
}

// tolerates: PreferNoSchedule is a preference, the rest Kubernetes' rule.
func tolerates(p *corev1.Pod, t corev1.Taint) bool {
	if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
		return true
	}
	return scheduling.Tolerates(p.Spec.Tolerations, &t)
}

func (c *checker) checkNode(h *planHost) {
	if len(h.new) == 0 {
		return
	}
	d := sumRequests(nil, h.old...)
	sumRequests(d, h.new...)
	if name, need, have, bad := overCommitted(d, h.node.Allocatable); bad {
		c.fail("node %s over-committed on %s: %g requested, %g allocatable", h.name, name, need, have)
	}
	for _, p := range h.new {
		for _, t := range h.node.Taints {
			if !tolerates(p, t) {
				c.fail("pod %s on node %s does not tolerate taint %s", podName(p), h.name, t.ToString())
			}
		}
		for k, v := range p.Spec.NodeSelector {
			if h.node.Labels[scheduling.NormalizeKey(k)] != v && h.node.Labels[k] != v {
				c.fail("pod %s on node %s: nodeSelector %s=%s not met", podName(p), h.name, k, v)
			}
		}
	}
}

// launchPrice is the cheapest offering of it that nc may launch.
func (c *checker) launchPrice(nc *scheduling.NewNodeClaim, it *scheduling.InstanceType) (float64, bool) {
	zones := nc.Requirements.Get(scheduling.LabelZone)
	cts := nc.Requirements.Get(scheduling.LabelCapacityType)
	best := math.Inf(1)
	for _, o := range it.Offerings {
		if !o.Available || !zones.Has(o.Zone) || !cts.Has(o.CapacityType) {
			continue
		}
		if c.unavailable(it.Name, o) {
			continue
		}
		best = math.Min(best, o.Price)
	}
	return best, !math.IsInf(best, 1)
}

func (c *checker) unavailable(name string, o scheduling.Offering) bool {
	for _, k := range c.in.Unavailable {
		if k.InstanceType == name && k.Zone == o.Zone && k.CapacityType == o.CapacityType {
			return true
		}
	}
	return false
}

func allocatable(it *scheduling.InstanceType) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range it.Capacity {
		q = q.DeepCopy()
		if o, ok := it.Overhead[n]; ok {
			q.Sub(o)
		}
		out[n] = q
	}
	return out
}

// daemonOverhead sums the DaemonSets whose pods would run on nc: they
// tolerate its taints and their nodeSelector can hold there.
func (c *checker) daemonOverhead(nc *scheduling.NewNodeClaim) workload.Demand {
	d := workload.Demand{}
	for _, ds := range c.in.DaemonSets {
		p := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		ok := true
		for _, t := range nc.Taints {
			ok = ok && tolerates(p, t)
		}
		for k, v := range p.Spec.NodeSelector {
			ok = ok && (nc.Labels[k] == v || nc.Requirements.Get(scheduling.NormalizeKey(k)).Has(v))
		}
		if ok {
			sumRequests(d, p)
		}
	}
	return d
}

func (c *checker) checkNodeClaim(h *planHost, pool *scheduling.NodePool) {
	nc := h.nc
	if pool == nil {
		c.fail("nodeclaim %s: unknown nodepool %q", h.name, nc.NodePool)
		return
	}
	if !samePods(h.new, nc.Pods) {
		c.fail("nodeclaim %s: Pods lists %d pods, placements put %d there", h.name, len(nc.Pods), len(h.new))
	}
	if len(h.new) == 0 {
		c.fail("nodeclaim %s has no pods", h.name)
	}
	maxTypes := c.in.Options.MaxInstanceTypes
	if maxTypes == 0 {
		maxTypes = scheduling.DefaultMaxInstanceTypes
	}
	if len(nc.InstanceTypes) == 0 || len(nc.InstanceTypes) > maxTypes {
		c.fail("nodeclaim %s lists %d instance types (1..%d allowed)", h.name, len(nc.InstanceTypes), maxTypes)
	}
	for _, t := range pool.Taints {
		if !hasTaint(nc.Taints, t) {
			c.fail("nodeclaim %s lacks its nodepool's taint %s", h.name, t.ToString())
		}
	}
	for _, p := range h.new {
		for _, t := range nc.Taints {
			if !tolerates(p, t) {
				c.fail("pod %s on nodeclaim %s does not tolerate taint %s", podName(p), h.name, t.ToString())
			}
		}
	}
	demand := sumRequests(c.daemonOverhead(nc), h.new...)
	// The instance-type key is checked by lookup: intersecting a long In
	// list with each listed type is quadratic.
	types := nc.Requirements.Get(scheduling.LabelInstanceType)
	rest := nc.Requirements.Copy()
	delete(rest, scheduling.LabelInstanceType)
	// Problems with listed types are grouped by kind, one error per kind
	// per NodeClaim, so that a bad NodeClaim with 600 types is one finding.
	type finding struct {
		count int
		first string
	}
	findings := map[string]*finding{}
	var kinds []string
	note := func(kind, detail string) {
		f := findings[kind]
		if f == nil {
			f = &finding{first: detail}
			findings[kind] = f
			kinds = append(kinds, kind)
		}
		f.count++
	}
	prev := math.Inf(-1)
	for _, it := range nc.InstanceTypes {
		if !types.Has(it.Name) {
			note("lists types its "+scheduling.LabelInstanceType+" requirement excludes", it.Name)
		}
		if err := it.Requirements.Intersects(rest); err != nil {
			note("lists types that conflict with its requirements", fmt.Sprintf("%s: %v", it.Name, err))
		}
		price, ok := c.launchPrice(nc, it)
		if !ok {
			note("lists types with no launchable offering", it.Name)
		} else if price < prev-1e-9 {
			note("lists instance types not cheapest first", it.Name)
		}
		prev = math.Max(prev, price)
		if name, need, have, bad := overCommitted(demand, c.allocatable(it)); bad {
			note("over-committed", fmt.Sprintf("as %s on %s: %g requested, %g allocatable", it.Name, name, need, have))
		}
		for _, p := range h.new {
			for k, v := range p.Spec.NodeSelector {
				if nc.Labels[k] == v {
					continue
				}
				key := scheduling.NormalizeKey(k)
				r := nc.Requirements.Get(key).Intersect(it.Requirements.Get(key))
				if r.IsComplement() || len(r.Values()) != 1 || r.Values()[0] != v {
					note(fmt.Sprintf("does not guarantee nodeSelector %s=%s of pod %s", k, v, podName(p)),
						fmt.Sprintf("%s (%s)", it.Name, r))
				}
			}
		}
	}
	for _, kind := range kinds {
		f := findings[kind]
		c.fail("nodeclaim %s %s (%d of %d listed types; first: %s)", h.name, kind, f.count, len(nc.InstanceTypes), f.first)
	}
}

func samePods(a, b []*corev1.Pod) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[*corev1.Pod]int, len(a))
	for _, p := range a {
		set[p]++
	}
	for _, p := range b {
		if set[p] == 0 {
			return false
		}
		set[p]--
	}
	return true
}

func hasTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, x := range ts {
		if x.Key == t.Key && x.Value == t.Value && x.Effect == t.Effect {
			return true
		}
	}
	return false
}

// checkLimits: launching any listed type of every NodeClaim must stay within
// the pool's remaining headroom, so each NodeClaim is charged its largest
// listed type.
func (c *checker) checkLimits(pools map[string]*scheduling.NodePool) {
	used := map[string]workload.Demand{}
	for _, nc := range c.res.NewNodeClaims {
		if pools[nc.NodePool] == nil {
			continue
		}
		u := used[nc.NodePool]
		if u == nil {
			u = workload.Demand{}
			used[nc.NodePool] = u
		}
		u[scheduling.ResourceNodes]++
		most := workload.Demand{}
		for _, it := range nc.InstanceTypes {
			for n, q := range it.Capacity {
				most[n] = math.Max(most[n], q.AsApproximateFloat64())
			}
		}
		for n, v := range most {
			u[n] += v
		}
	}
	for _, name := range sortedPoolNames(pools) {
		p := pools[name]
		for n, q := range p.Remaining {
			if v := used[name][n]; v > q.AsApproximateFloat64()+1e-9 {
				c.fail("nodepool %s: nodeclaims may use %g %s, %s remaining", name, v, n, q.String())
			}
		}
	}
}

func sortedPoolNames(pools map[string]*scheduling.NodePool) []string {
	out := make([]string, 0, len(pools))
	for n := range pools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

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
