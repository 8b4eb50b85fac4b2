package state

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// StateNode is one machine as Karpenter sees it: its Node, its NodeClaim, or
// both once they are joined by provider ID. Either pointer may be nil. The
// objects are shared with the informer cache and must not be modified.
type StateNode struct {
	Node      *corev1.Node
	NodeClaim *v1.NodeClaim

	// Pods bound to the node (DaemonSet pods included), by namespace/name.
	Pods map[types.NamespacedName]*corev1.Pod

	markedForDeletion bool
	nominatedUntil    time.Time
	// launchCharge is what an unlaunched NodeClaim counts against its
	// pool's limits (see Cluster.launchCharge).
	launchCharge corev1.ResourceList
}

// Name is the Node's name, or the NodeClaim's while no Node exists.
func (n *StateNode) Name() string {
	if n.Node != nil {
		return n.Node.Name
	}
	if n.NodeClaim != nil {
		return n.NodeClaim.Name
	}
	return ""
}

// ProviderID is the instance's ID, "" before launch.
func (n *StateNode) ProviderID() string {
	if n.Node != nil && n.Node.Spec.ProviderID != "" {
		return n.Node.Spec.ProviderID
	}
	if n.NodeClaim != nil {
		return n.NodeClaim.Status.ProviderID
	}
	return ""
}

// Managed reports whether Karpenter launched the machine.
func (n *StateNode) Managed() bool {
	if n.NodeClaim != nil {
		return true
	}
	_, ok := n.Node.Labels[v1.NodePoolLabelKey]
	return ok
}

// NodePoolName is the owning NodePool, "" for unmanaged nodes.
func (n *StateNode) NodePoolName() string {
	if n.NodeClaim != nil {
		if name := n.NodeClaim.Labels[v1.NodePoolLabelKey]; name != "" {
			return name
		}
	}
	if n.Node != nil {
		return n.Node.Labels[v1.NodePoolLabelKey]
	}
	return ""
}

// Registered reports whether the Node exists and registration synced it
// (always true for an unmanaged Node).
func (n *StateNode) Registered() bool {
	if n.Node == nil {
		return false
	}
	return !n.Managed() || n.Node.Labels[v1.NodeRegisteredLabelKey] == "true"
}

// Initialized reports whether the node is ready for pods: for managed nodes
// the initialized label, for unmanaged nodes existence.
func (n *StateNode) Initialized() bool {
	if n.Node == nil {
		return false
	}
	return !n.Managed() || n.Node.Labels[v1.NodeInitializedLabelKey] == "true"
}

// Labels are the Node's once it is initialized; before that the NodeClaim's
// labels overlaid by whatever the Node already has, since a starting Node
// may lack labels the NodeClaim promises.
func (n *StateNode) Labels() map[string]string {
	if n.Initialized() || n.NodeClaim == nil {
		return n.Node.Labels
	}
	out := maps.Clone(n.NodeClaim.Labels)
	if out == nil {
		out = map[string]string{}
	}
	if n.Node != nil {
		maps.Copy(out, n.Node.Labels)
	}
	return out
}

// Taints are the Node's once initialized; before that the NodeClaim's
// (startup taints excluded: they are meant to go away).
func (n *StateNode) Taints() []corev1.Taint {
	if n.Initialized() || n.NodeClaim == nil {
		return n.Node.Spec.Taints
	}
	return n.NodeClaim.Spec.Taints
}

// Allocatable is the Node's once initialized; before that the provider's
// estimate on the NodeClaim, because a starting kubelet may not report
// extended resources yet. Before launch there is no estimate, so the
// NodeClaim's requested resources stand in: the pods it was sized for fit,
// and a new round does not provision for them twice.
func (n *StateNode) Allocatable() corev1.ResourceList {
	switch {
	case n.Initialized() || n.NodeClaim == nil:
		return n.Node.Status.Allocatable
	case len(n.NodeClaim.Status.Allocatable) > 0:
		return n.NodeClaim.Status.Allocatable
	case n.Node != nil:
		return n.Node.Status.Allocatable
	}
	return n.NodeClaim.Spec.Resources.Requests
}

// Capacity is the machine's total, from the Node once registered, else the
// NodeClaim's estimate.
func (n *StateNode) Capacity() corev1.ResourceList {
	if n.Node != nil && (n.Registered() || n.NodeClaim == nil || len(n.NodeClaim.Status.Capacity) == 0) {
		return n.Node.Status.Capacity
	}
	if n.NodeClaim != nil {
		return n.NodeClaim.Status.Capacity
	}
	return nil
}

// Deleting reports whether the Node or NodeClaim is being deleted, or a
// controller marked the node for deletion.
func (n *StateNode) Deleting() bool {
	return n.markedForDeletion ||
		(n.Node != nil && !n.Node.DeletionTimestamp.IsZero()) ||
		(n.NodeClaim != nil && !n.NodeClaim.DeletionTimestamp.IsZero())
}

// MarkedForDeletion reports whether a controller marked the node.
func (n *StateNode) MarkedForDeletion() bool { return n.markedForDeletion }

// Nominated reports whether pending pods were recently planned onto this
// node, which keeps it from being disrupted under them.
func (n *StateNode) Nominated(now time.Time) bool { return now.Before(n.nominatedUntil) }

// PodRequests sums the requests of the bound pods; DaemonSet pods are
// summed separately by DaemonSetRequests.
func (n *StateNode) PodRequests() corev1.ResourceList {
	return n.sumRequests(func(p *corev1.Pod) bool { return !isDaemonSetPod(p) })
}

// DaemonSetRequests sums the requests of the bound DaemonSet pods.
func (n *StateNode) DaemonSetRequests() corev1.ResourceList {
	return n.sumRequests(isDaemonSetPod)
}

// PodLimits sums the limits of the bound pods other than DaemonSet pods.
func (n *StateNode) PodLimits() corev1.ResourceList {
	return n.sum(func(p *corev1.Pod) bool { return !isDaemonSetPod(p) }, podLimits)
}

// DaemonSetLimits sums the limits of the bound DaemonSet pods.
func (n *StateNode) DaemonSetLimits() corev1.ResourceList { return n.sum(isDaemonSetPod, podLimits) }

func (n *StateNode) sumRequests(include func(*corev1.Pod) bool) corev1.ResourceList {
	return n.sum(include, scheduling.PodRequests)
}

func (n *StateNode) sum(include func(*corev1.Pod) bool, of func(*corev1.Pod) corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range n.Pods {
		if !include(p) {
			continue
		}
		addInto(out, of(p))
	}
	return out
}

// clone copies the node shallowly: the objects stay shared, the pod map is
// fresh so callers can range over it without the cluster lock.
func (n *StateNode) clone() *StateNode {
	out := *n
	out.Pods = maps.Clone(n.Pods)
	return &out
}
