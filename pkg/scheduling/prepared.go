package scheduling

import (
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// nodeDerivation is what every solve derives from an existing node's
// labels, requirements and pods before placing anything: the requirements
// pods are matched against, its hostname, what its pods request and their
// host ports.
type nodeDerivation struct {
	// What it was derived from, to tell a node changed since (a copy
	// given another name, labels, requirements or pods) from the one
	// prepared. Labels are compared by content, the rest by identity
	// (the maps and slices are kept, so that an address is never that of
	// another map allocated since).
	name         string
	labels       map[string]string
	requirements Requirements
	pods         []*corev1.Pod

	// From the name, labels and requirements.
	reqs Requirements
	host string
	// From the pods: used sums the requests of the pods that hold anything
	// (not finished), each converted per pod as the solver converts it
	// (units), without the pods resource: count is how many pods that is.
	used  map[corev1.ResourceName]int64
	count int64
	// ports are those pods' host ports; the solver appends to a clipped
	// copy.
	ports []hostPort
	// anti are the node's pods with required pod anti-affinity terms
	// (finished or not, as the solver counts them).
	anti []*corev1.Pod

	// selected caches, by a topology group's pod filter (podFilterKey),
	// how many of those pods it selects: every solve over the node counts
	// them for each group, and a disruption pass solves over the same
	// nodes hundreds of times with the same groups. Solves share a
	// prepared node, so the cache is locked.
	mu       sync.Mutex
	selected map[string]int32
}

// maxSelected bounds a node's cache of group counts: groups come from the
// pending pods' terms, a few per workload, and a selector that names a
// changing label (a matchLabelKeys of pod-template-hash) would otherwise
// add a key for each rollout.
const maxSelected = 64

// countSelected is how many of the node's pods (those that hold anything)
// count returns for key, counted once per derivation when key is not
// empty.
func (d *nodeDerivation) countSelected(key string, pods []*corev1.Pod, count func(*corev1.Pod) bool) int32 {
	if key != "" {
		d.mu.Lock()
		n, ok := d.selected[key]
		d.mu.Unlock()
		if ok {
			return n
		}
	}
	var n int32
	for _, p := range pods {
		if !finished(p) && count(p) {
			n++
		}
	}
	if key != "" {
		d.mu.Lock()
		if d.selected == nil || len(d.selected) >= maxSelected {
			d.selected = map[string]int32{}
		}
		d.selected[key] = n
		d.mu.Unlock()
	}
	return n
}

// PrepareNodes returns copies of nodes that carry what the solver derives
// from each node's labels, requirements and pods, so that solving the same
// nodes many times derives it once: a disruption pass simulates every
// candidate, and each simulation is a solve over all the other nodes. The
// answers are the same as for the nodes themselves. A copy given other
// labels, requirements or pods is derived afresh; taints and the rest may
// change freely. A node already prepared and unchanged keeps what it has.
func PrepareNodes(nodes []*ExistingNode) []*ExistingNode {
	out := make([]*ExistingNode, len(nodes))
	for i, n := range nodes {
		cp := *n
		cp.prepared = n.derived()
		out[i] = &cp
	}
	return out
}

// NodeCache prepares the nodes of successive snapshots (provisioning's
// rounds, disruption's passes), keeping each node's derivation from one
// snapshot to the next: what depends on its labels while they are the same,
// what depends on its pods while they are the same pod objects. Between
// two rounds most nodes change neither, and deriving every node afresh was
// most of a round's garbage at 1,000 nodes. It holds the last snapshot's
// derivations only. Safe for concurrent use.
type NodeCache struct {
	mu     sync.Mutex
	byName map[string]*nodeDerivation
}

// Prepare is PrepareNodes, reusing what the previous call derived for a
// node of the same name where it still holds.
func (c *NodeCache) Prepare(nodes []*ExistingNode) []*ExistingNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string]*nodeDerivation, len(nodes))
	out := make([]*ExistingNode, len(nodes))
	for i, n := range nodes {
		cp := *n
		if d := n.prepared; d != nil && d.matches(n) {
			cp.prepared = d
		} else {
			cp.prepared = rederive(c.byName[n.Name], n)
		}
		next[n.Name] = cp.prepared
		out[i] = &cp
	}
	c.byName = next
	return out
}

// derived is the node's prepared derivation when it still matches the
// node, or a fresh one.
func (n *ExistingNode) derived() *nodeDerivation {
	if d := n.prepared; d != nil && d.matches(n) {
		return d
	}
	return derive(n)
}

func derive(n *ExistingNode) *nodeDerivation { return rederive(nil, n) }

// rederive derives n, taking from prev (an earlier derivation of a node
// of the same name, or nil) the parts whose inputs are unchanged.
func rederive(prev *nodeDerivation, n *ExistingNode) *nodeDerivation {
	d := &nodeDerivation{name: n.Name, labels: n.Labels, requirements: n.Requirements, pods: n.Pods}
	if prev != nil && prev.sameLabels(n) {
		d.reqs, d.host = prev.reqs, prev.host
	} else {
		d.deriveRequirements(n)
	}
	if prev != nil && prev.samePods(n) {
		d.used, d.count, d.ports, d.anti = prev.used, prev.count, prev.ports, prev.anti
		d.selected = prev.cachedSelected()
	} else {
		d.derivePods(n)
	}
	return d
}

// cachedSelected is a copy of d's group counts, for a derivation of the
// same pods.
func (d *nodeDerivation) cachedSelected() map[string]int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.selected) == 0 {
		return nil
	}
	out := make(map[string]int32, len(d.selected))
	for k, v := range d.selected {
		out[k] = v
	}
	return out
}

func (d *nodeDerivation) deriveRequirements(n *ExistingNode) {
	d.reqs = RequirementsFromLabels(n.Labels)
	for _, k := range n.Requirements.Keys() {
		d.reqs.Add(n.Requirements[k])
	}
	if h, ok := d.reqs[LabelHostname]; ok && len(h.Values()) == 1 {
		d.host = h.Values()[0]
	} else {
		d.host = n.Name
		d.reqs[LabelHostname] = NewRequirement(LabelHostname, OpIn, n.Name)
	}
}

func (d *nodeDerivation) derivePods(n *ExistingNode) {
	d.used = map[corev1.ResourceName]int64{}
	for _, p := range n.Pods {
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			d.anti = append(d.anti, p)
		}
		if finished(p) {
			continue
		}
		for k, q := range PodRequests(p) {
			if k != corev1.ResourcePods {
				d.used[k] += units(k, q)
			}
		}
		d.count++
		d.ports = append(d.ports, podHostPorts(p)...)
	}
}

// finished pods hold nothing on their node.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (d *nodeDerivation) matches(n *ExistingNode) bool {
	return d.sameLabels(n) && d.samePods(n)
}

// sameLabels: the same name and requirements, and labels of the same
// content (a Node the informer replaced carries a new map of the same
// labels).
func (d *nodeDerivation) sameLabels(n *ExistingNode) bool {
	if d.name != n.Name || mapID(n.Requirements) != mapID(d.requirements) || len(n.Labels) != len(d.labels) {
		return false
	}
	if mapID(n.Labels) == mapID(d.labels) {
		return true
	}
	for k, v := range n.Labels {
		if w, ok := d.labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// samePods: the same pod objects in the same order.
func (d *nodeDerivation) samePods(n *ExistingNode) bool {
	if len(n.Pods) != len(d.pods) {
		return false
	}
	for i, p := range n.Pods {
		if p != d.pods[i] {
			return false
		}
	}
	return true
}

// mapID tells maps apart by identity (0 for nil): a prepared node's
// requirements are the map it was prepared with.
func mapID[M ~map[K]V, K comparable, V any](m M) uintptr {
	if m == nil {
		return 0
	}
	return reflect.ValueOf(m).Pointer()
}
