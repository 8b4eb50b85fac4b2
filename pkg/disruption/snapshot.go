package disruption

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Snapshot is everything one disruption pass reads.
type Snapshot struct {
	// Now is the pass's clock reading; schedules, do-not-disrupt durations
	// and lifetimes are judged against it.
	Now time.Time
	// Nodes are the machines the cluster state knows, managed or not.
	Nodes []*Node
	// NodePools by name.
	NodePools map[string]*v1.NodePool
	// PDBs are every PodDisruptionBudget in the cluster.
	PDBs []*policyv1.PodDisruptionBudget
	// InstanceTypes are each NodePool's instance types, by pool name;
	// consolidation prices candidates and replacements with them.
	InstanceTypes map[string][]*scheduling.InstanceType
	// Pending are the pods waiting for a node (provisionable, not yet
	// bound): consolidation must leave them room, as upstream's
	// simulations place them beside the candidates' pods. They may be the
	// controller's cached objects: read them, copy before changing one.
	Pending []*corev1.Pod
	// DaemonSets are the cluster's, for a simulation over the snapshot to
	// count their pods on new NodeClaims (offline planning; the controller
	// simulates over cluster state).
	DaemonSets []*appsv1.DaemonSet
}

// Node is one machine: a NodeClaim and its Node (either may be nil), the
// pods bound to it, and what the controller knows beyond the objects.
type Node struct {
	NodeClaim *v1.NodeClaim
	Node      *corev1.Node
	// Pods bound to the node, DaemonSet pods included.
	Pods []*corev1.Pod
	// NodePool is the karpenter.sh/nodepool label ("" when absent).
	NodePool string
	// Initialized: the node carries karpenter.sh/initialized.
	Initialized bool
	// Deleting: the Node or NodeClaim has a deletion timestamp.
	Deleting bool
	// MarkedForDeletion: a controller is about to delete it (in memory).
	MarkedForDeletion bool
	// Nominated: pending pods were recently planned onto it.
	Nominated bool
	// InQueue: a disruption command for it is in flight.
	InQueue bool
}

// Name is the Node's name, or the NodeClaim's while there is no Node.
func (n *Node) Name() string {
	if n.Node != nil {
		return n.Node.Name
	}
	if n.NodeClaim != nil {
		return n.NodeClaim.Name
	}
	return ""
}

// NodeClaimName is "" for unmanaged nodes.
func (n *Node) NodeClaimName() string {
	if n.NodeClaim == nil {
		return ""
	}
	return n.NodeClaim.Name
}

// ready reports the Node's Ready condition.
func (n *Node) ready() bool {
	if n.Node == nil {
		return false
	}
	for _, c := range n.Node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// condition returns the NodeClaim's condition of type t, or nil.
func condition(nc *v1.NodeClaim, t string) *v1.Condition {
	if nc == nil {
		return nil
	}
	for i := range nc.Status.Conditions {
		if nc.Status.Conditions[i].Type == t {
			return &nc.Status.Conditions[i]
		}
	}
	return nil
}

func conditionTrue(nc *v1.NodeClaim, t string) bool {
	c := condition(nc, t)
	return c != nil && c.Status == "True"
}
