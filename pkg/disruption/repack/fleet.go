package repack

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// vec is cpu (millicores), memory (bytes) and pods.
type vec [3]float64

func (a vec) add(b vec) vec { return vec{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }

func (a vec) sub(b vec) vec { return vec{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

func (a vec) fits(b vec) bool {
	return b[0] <= a[0]+1e-9 && b[1] <= a[1]+1e-9 && b[2] <= a[2]+1e-9
}

func toVec(rl corev1.ResourceList) vec {
	var v vec
	if q, ok := rl[corev1.ResourceCPU]; ok {
		v[0] = float64(q.MilliValue())
	}
	if q, ok := rl[corev1.ResourceMemory]; ok {
		v[1] = float64(q.Value())
	}
	if q, ok := rl[corev1.ResourcePods]; ok {
		v[2] = float64(q.Value())
	} else {
		v[2] = 110
	}
	return v
}

// allocOf is an instance type's allocatable: capacity less overhead (the
// overhead reserves no pod slots).
func allocOf(it *scheduling.InstanceType) vec {
	a := toVec(it.Capacity)
	o := toVec(it.Overhead)
	return vec{a[0] - o[0], a[1] - o[1], a[2]}
}

func podVec(p *corev1.Pod) vec {
	v := toVec(scheduling.PodRequests(p))
	v[2] = 1
	return v
}

// podSize orders pods for packing: cpu cores plus memory in 4 GiB units
// (the memory a core comes with on general-purpose machines).
func podSize(r vec) float64 { return r[0]/1000 + r[1]/(4<<30) }

// machine is one machine in the planner's working state. A worker mutates
// only the nodes of its own pool.
type machine struct {
	node         *disruption.Node
	name         string
	pool         string
	allocatable  vec
	used         vec
	usedBefore   vec // used before this pass's moves
	tentative    vec // tentative use while fitting
	pods         []*corev1.Pod
	candidate    *disruption.Candidate
	price        float64
	instanceType string
	capacityType string
	// destination: may receive moved pods (initialized, not leaving, not inside
	// its consolidateAfter window).
	destination bool
	// removed by a move of this pass; receiver: got pods from one (its
	// pods are not moved again in the same pass).
	removed, receiver bool
	// blocked: a candidate the history rules keep this pass.
	blocked bool
	// en is the machine as the solver last saw it (see existing).
	en *scheduling.ExistingNode
}

// existing is the machine as the solver sees it, prepared
// (scheduling.PrepareNodes) once for as long as its pods stay the same: a
// pass solves over the same machines hundreds of times, and deriving every
// node's requirements and pod requests afresh for each solve was most of
// the planner's CPU at 1,000 nodes. The solver does not change the nodes
// it is given, so one copy serves every solve.
func (m *machine) existing() *scheduling.ExistingNode {
	// The same pod objects in the same order (a machine's pods only grow
	// within a pass, by the moves it receives).
	if m.en != nil && slices.Equal(m.en.Pods, m.pods) {
		return m.en
	}
	m.en = scheduling.PrepareNodes([]*scheduling.ExistingNode{{
		Name: m.name, NodeClaim: m.node.NodeClaimName(), Labels: m.node.Node.Labels, Taints: m.node.Node.Spec.Taints,
		Allocatable: m.node.Node.Status.Allocatable, Pods: m.pods, Initialized: true, Managed: m.node.NodeClaim != nil,
	}})[0]
	return m.en
}

// typeIndex finds a pool's instance types by name.
type typeIndex map[string]map[string]*scheduling.InstanceType

func newTypeIndex(snap *disruption.Snapshot) typeIndex {
	out := typeIndex{}
	for pool, its := range snap.InstanceTypes {
		m := make(map[string]*scheduling.InstanceType, len(its))
		for _, it := range its {
			m[it.Name] = it
		}
		out[pool] = m
	}
	return out
}

// nodePrice is the cheapest offering of the node's type compatible with
// its labels, as upstream prices a candidate.
func (t typeIndex) nodePrice(n *disruption.Node) (float64, *scheduling.InstanceType, error) {
	if n.Node == nil {
		return 0, nil, fmt.Errorf("no node")
	}
	labels := n.Node.Labels
	it := t[n.NodePool][labels[corev1.LabelInstanceTypeStable]]
	if it == nil {
		return 0, nil, fmt.Errorf("instance type %q not found", labels[corev1.LabelInstanceTypeStable])
	}
	price, found := it.PriceFor(labels)
	if !found {
		return 0, it, fmt.Errorf("no offering for the node's zone and capacity type")
	}
	return price, it, nil
}

// daemonSets rebuilds the DaemonSets whose pods run on the snapshot's
// nodes (one per owner, from its first pod by name) so that the solver
// counts their overhead on every new NodeClaim. The DaemonSet controller's
// per-node affinity (matchFields on metadata.name) is dropped.
func daemonSets(snap *disruption.Snapshot) []*appsv1.DaemonSet {
	first := map[string]*corev1.Pod{}
	for _, n := range snap.Nodes {
		for _, p := range n.Pods {
			for _, o := range p.OwnerReferences {
				if o.Kind != "DaemonSet" {
					continue
				}
				key := p.Namespace + "/" + o.Name
				if have, ok := first[key]; !ok || p.Name < have.Name {
					first[key] = p
				}
			}
		}
	}
	keys := make([]string, 0, len(first))
	for k := range first {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*appsv1.DaemonSet, 0, len(keys))
	for _, k := range keys {
		p := first[k]
		spec := p.Spec.DeepCopy()
		spec.NodeName = ""
		if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			var terms []corev1.NodeSelectorTerm
			for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				if len(t.MatchFields) == 0 {
					terms = append(terms, t)
				}
			}
			if len(terms) == 0 {
				a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
			} else {
				a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
			}
		}
		var owner string
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" {
				owner = o.Name
			}
		}
		out = append(out, &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: owner, Namespace: p.Namespace},
			Spec:       appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: *spec}},
		})
	}
	return out
}

// compatible is a quick pre-check before the solver confirms: the node
// has the pod's nodeSelector labels and no hard taint the pod does not
// tolerate.
func compatible(p *corev1.Pod, n *machine) bool {
	labels := n.node.Node.Labels
	for k, v := range p.Spec.NodeSelector {
		if labels[k] != v {
			return false
		}
	}
	for i := range n.node.Node.Spec.Taints {
		t := &n.node.Node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !scheduling.Tolerates(p.Spec.Tolerations, t) {
			return false
		}
	}
	return true
}

// topologyBound reports whether a pod's placement depends on pods beyond
// the destinations the planner hands the solver (spread, pod affinity).
func topologyBound(p *corev1.Pod) bool {
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		return true
	}
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

// compatCache memoizes compatible for a worker's nodes by the pod's
// scheduling constraints (nodeSelector and tolerations): the pods of one
// owner share them, and the deletes' checks ask for every pod against
// every node of the pool (on 5,000 nodes the label lookups alone took
// most of a pass).
type compatCache struct {
	nodes []*machine
	// class is each pod's constraint class; rows[class][i] is 0 (not yet
	// known), 1 (compatible with nodes[i]) or 2 (not).
	class map[*corev1.Pod]int
	keys  map[string]int
	rows  [][]int8
}

func newCompatCache(nodes []*machine) *compatCache {
	return &compatCache{nodes: nodes, class: map[*corev1.Pod]int{}, keys: map[string]int{}}
}

// ok reports compatible(p, nodes[i]).
func (c *compatCache) ok(p *corev1.Pod, i int) bool {
	k, found := c.class[p]
	if !found {
		key := constraintKey(p)
		if k, found = c.keys[key]; !found {
			k = len(c.rows)
			c.keys[key] = k
			c.rows = append(c.rows, make([]int8, len(c.nodes)))
		}
		c.class[p] = k
	}
	row := c.rows[k]
	if row[i] == 0 {
		row[i] = 2
		if compatible(p, c.nodes[i]) {
			row[i] = 1
		}
	}
	return row[i] == 1
}

// constraintKey is what compatible reads of a pod, as a string.
func constraintKey(p *corev1.Pod) string {
	sel := make([]string, 0, len(p.Spec.NodeSelector))
	for k, v := range p.Spec.NodeSelector {
		sel = append(sel, k+"="+v)
	}
	sort.Strings(sel)
	var b strings.Builder
	for _, s := range sel {
		b.WriteString(s)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, t := range p.Spec.Tolerations {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s\x00", t.Key, t.Operator, t.Value, t.Effect)
	}
	return b.String()
}
