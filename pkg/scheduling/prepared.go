package scheduling

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// nodeDerivation is what every solve derives from an existing node's
// labels, requirements and pods before placing anything: the requirements
// pods are matched against, its hostname, what its pods request and their
// host ports.
type nodeDerivation struct {
	// What it was derived from, to tell a node changed since (a copy
	// given other labels, requirements or pods) from the one prepared.
	labels, requirements uintptr
	pods                 []*corev1.Pod

	reqs Requirements
	host string
	// used sums the requests of the pods that hold anything (not
	// finished), each converted per pod as the solver converts it
	// (units), without the pods resource: count is how many pods that is.
	used  map[corev1.ResourceName]int64
	count int64
	// ports are those pods' host ports; the solver appends to a clipped
	// copy.
	ports []hostPort
}

// PrepareNodes returns copies of nodes that carry what the solver derives
// from each node's labels, requirements and pods, so that solving the same
// nodes many times derives it once: a disruption pass simulates every
// candidate, and each simulation is a solve over all the other nodes. The
// answers are the same as for the nodes themselves. A copy given other
// labels, requirements or pods is derived afresh; taints and the rest may
// change freely.
func PrepareNodes(nodes []*ExistingNode) []*ExistingNode {
	out := make([]*ExistingNode, len(nodes))
	for i, n := range nodes {
		cp := *n
		cp.prepared = derive(n)
		out[i] = &cp
	}
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

func derive(n *ExistingNode) *nodeDerivation {
	d := &nodeDerivation{labels: mapID(n.Labels), requirements: mapID(n.Requirements), pods: n.Pods,
		used: map[corev1.ResourceName]int64{}}
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
	for _, p := range n.Pods {
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
	return d
}

// finished pods hold nothing on their node.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (d *nodeDerivation) matches(n *ExistingNode) bool {
	if mapID(n.Labels) != d.labels || mapID(n.Requirements) != d.requirements || len(n.Pods) != len(d.pods) {
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
// labels and requirements are the maps it was prepared with.
func mapID[M ~map[K]V, K comparable, V any](m M) uintptr {
	if m == nil {
		return 0
	}
	return reflect.ValueOf(m).Pointer()
}
