package benchmark

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

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

func sortedPoolNames(pools map[string]*scheduling.NodePool) []string {
	out := make([]string, 0, len(pools))
	for n := range pools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
