package benchmark

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Execute carries out one pass's commands at now, as the cluster would.
// Each evicted pod is replaced by its owner with a new pod (a new name,
// created a second after now), and the new pods are bound one by one, in
// the evicted pods' name order, to the node with the most room left (the
// kube-scheduler's LeastAllocated scoring), not where the plan meant them
// to go. It happens in two waves, as in the controller's queue: a command
// without replacements deletes its candidates at once, so their pods are
// placed while the replacements are still launching; a command with
// replacements deletes its candidates once they are initialized (and, for
// commands with Command.LaunchTaint, without disruption.LaunchTaint from then on), so its
// pods, and any of the first wave's that found no room, are placed with
// the new nodes up. Pods that fit nowhere then are provisioned by the
// solver and counted in Fresh. It returns the nodes each command launched.
func (c *Cluster) Execute(cmds []*disruption.Command, now time.Time) ([][]string, error) {
	removed := map[string]bool{}
	var first, second []*corev1.Pod
	for _, cmd := range cmds {
		for _, cand := range cmd.Candidates {
			removed[cand.Name()] = true
			if len(cmd.Replacements) == 0 {
				first = append(first, cand.Reschedulable...)
			} else {
				second = append(second, cand.Reschedulable...)
			}
		}
	}
	c.Commands += len(cmds)
	c.Evictions += len(first) + len(second)
	for _, p := range append(append([]*corev1.Pod(nil), first...), second...) {
		if p.Annotations[replacementMark] != "" {
			c.Reevictions++
		}
	}
	kept := c.Snap.Nodes[:0]
	for _, n := range c.Snap.Nodes {
		if !removed[n.Name()] {
			kept = append(kept, n)
		}
	}
	c.Snap.Nodes = kept
	left := c.bindLeastAllocated(c.replacements(first, now))
	launched := make([][]string, len(cmds))
	for i, cmd := range cmds {
		for _, nc := range cmd.Replacements {
			n, err := c.launch(nc, now)
			if err != nil {
				return nil, err
			}
			launched[i] = append(launched[i], n.Name())
		}
	}
	second = c.replacements(second, now)
	if len(left) > 0 {
		second = append(second, left...)
		sort.SliceStable(second, func(i, j int) bool { return second[i].Name < second[j].Name })
	}
	fresh, err := c.Provision(c.bindLeastAllocated(second), now)
	c.Fresh += fresh
	return launched, err
}

// replacements are the pods the owners of evicted create a second after
// now, in the evicted pods' name order.
func (c *Cluster) replacements(evicted []*corev1.Pod, now time.Time) []*corev1.Pod {
	sort.Slice(evicted, func(i, j int) bool { return evicted[i].Name < evicted[j].Name })
	out := make([]*corev1.Pod, len(evicted))
	for i, p := range evicted {
		out[i] = c.replacement(p, now.Add(time.Second))
	}
	return out
}

// replacementMark marks the pods created for evicted ones, so that a second
// eviction of a moved pod is counted (Cluster.Reevictions). Nothing the
// algorithms read looks at it.
const replacementMark = "benchmark.karpenter-go.io/replaces-evicted"

// replacement is the pod a ReplicaSet creates at created for evicted p:
// the same template and owner under a new name.
func (c *Cluster) replacement(p *corev1.Pod, created time.Time) *corev1.Pod {
	cp := p.DeepCopy()
	base := p.Name
	if i := strings.LastIndex(base, "-"); i > 0 {
		base = base[:i]
	}
	cp.Name = c.name(base)
	cp.UID = types.UID(cp.Name)
	cp.CreationTimestamp = metav1.NewTime(created)
	cp.Spec.NodeName = ""
	// A ReplicaSet creates its pods from the template, without the
	// annotations set on the evicted one since.
	delete(cp.Annotations, corev1.PodDeletionCost)
	delete(cp.Annotations, disruption.DeletionCostMark)
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[replacementMark] = "true"
	return cp
}

// applyDrain puts disruption.DrainTaint on the nodes alg drains and takes it
// off the others, as the disruption controller does after a pass.
func (c *Cluster) applyDrain(alg Algorithm) {
	want := map[string]bool{}
	for _, name := range alg.Strategy.Drain(nil) {
		want[name] = true
	}
	for _, n := range c.Snap.Nodes {
		kept := n.Node.Spec.Taints[:0:0]
		for _, t := range n.Node.Spec.Taints {
			if !t.MatchTaint(&disruption.DrainTaint) {
				kept = append(kept, t)
			}
		}
		if want[n.Name()] {
			kept = append(kept, disruption.DrainTaint)
		}
		n.Node.Spec.Taints = kept
		for _, p := range n.Pods {
			disruption.ApplyAnnotations(p, disruption.DeletionCostPatch(p, want[n.Name()]))
		}
	}
}

// launch starts a node for a NodeClaim: its cheapest type and offering
// compatible with its requirements.
func (c *Cluster) launch(nc *scheduling.NewNodeClaim, now time.Time) (*disruption.Node, error) {
	var bestIt *scheduling.InstanceType
	var bestO *scheduling.Offering
	for _, it := range nc.InstanceTypes {
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if !o.Available || !scheduling.OfferingCompatible(o, nc.Requirements) {
				continue
			}
			if bestO == nil || o.Price < bestO.Price {
				bestIt, bestO = it, o
			}
		}
	}
	if bestIt == nil {
		return nil, fmt.Errorf("no offering for a NodeClaim of pool %s", nc.NodePool)
	}
	return c.AddNode(nc.NodePool, bestIt, bestO, now), nil
}

type room struct {
	n     *disruption.Node
	alloc [3]float64
	used  [3]float64
}

func podReq(p *corev1.Pod) [3]float64 {
	r := scheduling.PodRequests(p)
	return [3]float64{float64(r.Cpu().MilliValue()), float64(r.Memory().Value()), 1}
}

// bindLeastAllocated binds each pod to the compatible node with the most
// free room after it (mean of the cpu and memory shares), nodes without a
// PreferNoSchedule taint first, returning the pods that fit nowhere.
func (c *Cluster) bindLeastAllocated(pods []*corev1.Pod) []*corev1.Pod {
	if len(pods) == 0 {
		return nil
	}
	rooms := make([]*room, 0, len(c.Snap.Nodes))
	for _, n := range c.Snap.Nodes {
		a := n.Node.Status.Allocatable
		r := &room{n: n, alloc: [3]float64{float64(a.Cpu().MilliValue()), float64(a.Memory().Value()), float64(a.Pods().Value())}}
		for _, p := range n.Pods {
			q := podReq(p)
			for k := range q {
				r.used[k] += q[k]
			}
		}
		rooms = append(rooms, r)
	}
	var left []*corev1.Pod
	for _, p := range pods {
		q := podReq(p)
		counts, maxSkew := zoneSkew(p, c.Snap.Nodes)
		var best *room
		bestScore := -1.0
		for _, r := range rooms {
			if r.used[0]+q[0] > r.alloc[0] || r.used[1]+q[1] > r.alloc[1] || r.used[2]+q[2] > r.alloc[2] {
				continue
			}
			if !admits(p, r.n, counts, maxSkew) {
				continue
			}
			// TaintToleration (weight 3) outweighs LeastAllocated (weight
			// 1): a node with a PreferNoSchedule taint gets the pod only
			// when no other node has room.
			preferred := 1.0
			for _, t := range r.n.Node.Spec.Taints {
				if t.Effect == corev1.TaintEffectPreferNoSchedule {
					preferred = 0
				}
			}
			score := 3*preferred + ((r.alloc[0]-r.used[0]-q[0])/r.alloc[0]+(r.alloc[1]-r.used[1]-q[1])/r.alloc[1])/2
			if score > bestScore {
				best, bestScore = r, score
			}
		}
		if best == nil {
			left = append(left, p)
			continue
		}
		for k := range q {
			best.used[k] += q[k]
		}
		c.Bind(p, best.n)
	}
	return left
}

// Provision places pending pods as a provisioning round would: the solver
// over the existing nodes and the pools, new NodeClaims launched. It
// returns how many pods went to new nodes.
func (c *Cluster) Provision(pods []*corev1.Pod, now time.Time) (int, error) {
	if len(pods) == 0 {
		return 0, nil
	}
	in := c.input(pods)
	res := scheduling.Solve(in)
	byName := map[string]*disruption.Node{}
	for _, n := range c.Snap.Nodes {
		byName[n.Name()] = n
	}
	claims := make([]*disruption.Node, len(res.NewNodeClaims))
	fresh := 0
	for i, pl := range res.Placements {
		p := pods[i]
		switch {
		case pl.Node != "":
			c.Bind(p, byName[pl.Node])
		case pl.NodeClaim >= 0:
			if claims[pl.NodeClaim] == nil {
				n, err := c.launch(res.NewNodeClaims[pl.NodeClaim], now)
				if err != nil {
					return fresh, err
				}
				claims[pl.NodeClaim] = n
			}
			c.Bind(p, claims[pl.NodeClaim])
			fresh++
		default:
			return fresh, fmt.Errorf("pod %s fits nowhere: %s", p.Name, pl.Why())
		}
	}
	return fresh, nil
}

// input is a solve of pods over the cluster and its pools.
func (c *Cluster) input(pods []*corev1.Pod) *scheduling.Input {
	moved := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		cp := p.DeepCopy()
		cp.Spec.NodeName = ""
		moved[i] = cp
	}
	in := &scheduling.Input{Pods: moved, Options: scheduling.Options{Robust: true}}
	if !c.noDaemon {
		in.DaemonSets = []*appsv1.DaemonSet{daemonSet()}
	}
	for _, n := range c.Snap.Nodes {
		in.Nodes = append(in.Nodes, &scheduling.ExistingNode{Name: n.Name(), NodeClaim: n.NodeClaimName(), Labels: n.Node.Labels,
			Allocatable: n.Node.Status.Allocatable, Pods: n.Pods, Initialized: true, Managed: true})
	}
	for _, name := range c.poolNames() {
		var weight int32
		if w := c.Snap.NodePools[name].Spec.Weight; w != nil {
			weight = *w
		}
		in.NodePools = append(in.NodePools, &scheduling.NodePool{Name: name, Weight: weight, Requirements: c.poolReqs(name),
			Labels: map[string]string{v1.NodePoolLabelKey: name}, InstanceTypes: c.Catalog})
	}
	return in
}

// selects reports whether p's node selector allows n.
func selects(p *corev1.Pod, n *disruption.Node) bool {
	for k, v := range p.Spec.NodeSelector {
		if n.Node.Labels[k] != v {
			return false
		}
	}
	return true
}

// zoneSkew is, for a pod with a DoNotSchedule zone spread, its maxSkew and
// how many of its deployment's pods run in each zone of the nodes its
// selector allows (nil when it has no such spread).
func zoneSkew(p *corev1.Pod, nodes []*disruption.Node) (map[string]int, int) {
	for _, tsc := range p.Spec.TopologySpreadConstraints {
		if tsc.TopologyKey != corev1.LabelTopologyZone || tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		counts := map[string]int{}
		for _, m := range nodes {
			if !selects(p, m) {
				continue
			}
			z := m.Node.Labels[corev1.LabelTopologyZone]
			counts[z] += 0
			for _, q := range m.Pods {
				if q.Labels["app"] == p.Labels["app"] && q.Namespace == p.Namespace {
					counts[z]++
				}
			}
		}
		return counts, int(tsc.MaxSkew)
	}
	return nil, 0
}

// admits reports whether the kube-scheduler's filters let p onto n: its
// node selector, a required anti-affinity to its own pods per hostname,
// and its zone spread (counts and maxSkew from zoneSkew).
func admits(p *corev1.Pod, n *disruption.Node, counts map[string]int, maxSkew int) bool {
	if !selects(p, n) {
		return false
	}
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		for _, q := range n.Pods {
			if q.Labels["app"] == p.Labels["app"] {
				return false
			}
		}
	}
	if counts != nil {
		low := math.MaxInt
		for _, k := range counts {
			low = min(low, k)
		}
		if counts[n.Node.Labels[corev1.LabelTopologyZone]]+1-low > maxSkew {
			return false
		}
	}
	return true
}

// daemonSet is the node agent's DaemonSet.
func daemonSet() *appsv1.DaemonSet {
	p := newPod("agent", "", daemon, "DaemonSet", daemon.name)
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: daemon.name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: p.Spec}}}
}

// daemonSetsOf is the node agent's DaemonSet when the snapshot's nodes run
// it, so that a simulation counts the agent on new NodeClaims.
func daemonSetsOf(snap *disruption.Snapshot) []*appsv1.DaemonSet {
	for _, n := range snap.Nodes {
		for _, p := range n.Pods {
			if len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Kind == "DaemonSet" {
				return []*appsv1.DaemonSet{daemonSet()}
			}
		}
	}
	return nil
}

// Bound is a floor under the $/h of any fleet for the cluster's pods: per
// pool, the LP relaxation over cpu and memory (buy fractional machines of
// the pool's types, each at its cheapest offering the pool may buy, whose
// allocatable minus the DaemonSet's requests covers the pods' total), summed
// over pools (every pod is pinned to its pool). Pods are indivisible and
// machines are whole, so no real fleet costs less.
func (c *Cluster) Bound() float64 {
	demand := map[string][2]float64{}
	for _, n := range c.Snap.Nodes {
		for _, p := range n.Pods {
			if !disruption.Reschedulable(p) {
				continue
			}
			q := podReq(p)
			d := demand[n.NodePool]
			d[0], d[1] = d[0]+q[0], d[1]+q[1]
			demand[n.NodePool] = d
		}
	}
	ds := podReq(newPod("agent", "", daemon, "DaemonSet", daemon.name))
	total := 0.0
	for _, pool := range c.poolNames() {
		d := demand[pool]
		if d[0] == 0 && d[1] == 0 {
			continue
		}
		var rows [][3]float64 // cpu, memory, price
		for _, it := range c.Catalog {
			o := c.poolOffer(pool, it, "")
			if o == nil {
				continue
			}
			a := allocatable(it)
			cpu, mem := float64(a.Cpu().MilliValue())-ds[0], float64(a.Memory().Value())-ds[1]
			if cpu > 0 && mem > 0 {
				rows = append(rows, [3]float64{cpu, mem, o.Price})
			}
		}
		total += coverLP2(rows, d)
	}
	return total
}

// coverLP2 is min Σ p_t x_t subject to Σ a_t x_t ≥ d over two resources,
// x ≥ 0. An optimum has at most two types at work, so it is the best of
// every single type and every pair solved with both constraints tight.
func coverLP2(rows [][3]float64, d [2]float64) float64 {
	best := math.Inf(1)
	for _, r := range rows {
		x := math.Max(d[0]/r[0], d[1]/r[1])
		best = math.Min(best, x*r[2])
	}
	for i := range rows {
		for j := i + 1; j < len(rows); j++ {
			a, b := rows[i], rows[j]
			det := a[0]*b[1] - a[1]*b[0]
			if math.Abs(det) < 1e-12 {
				continue
			}
			xa := (d[0]*b[1] - d[1]*b[0]) / det
			xb := (a[0]*d[1] - a[1]*d[0]) / det
			if xa < 0 || xb < 0 {
				continue
			}
			best = math.Min(best, xa*a[2]+xb*b[2])
		}
	}
	return best
}
