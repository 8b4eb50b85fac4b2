package disruption

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// View is the snapshot as a snapshot.View, so that offline planning (the
// benchmarks, tests, the planner's pools) builds the solver's input with
// snapshot.Build exactly as the controller does from cluster state: its
// nodes are the existing capacity (a node being deleted or marked is none,
// and its pods move), its Ready dynamic NodePools with
// Snapshot.InstanceTypes what may be launched, its pending pods and
// DaemonSets what provisioning would plan for.
func (s *Snapshot) View() snapshot.View { return view{s} }

type view struct{ s *Snapshot }

// Synced implements snapshot.View: a snapshot is complete by construction.
func (v view) Synced(context.Context) bool { return true }

// SchedulingNodes implements snapshot.View: every node not being deleted
// or marked for deletion, as the solver sees it.
func (v view) SchedulingNodes() []*scheduling.ExistingNode {
	out := make([]*scheduling.ExistingNode, 0, len(v.s.Nodes))
	for _, n := range v.s.Nodes {
		if n.Deleting || n.MarkedForDeletion {
			continue
		}
		if en := n.ExistingNode(); en != nil {
			out = append(out, en)
		}
	}
	return out
}

// NodePoolResources implements snapshot.View: the capacity of the pool's
// nodes and in-flight NodeClaims not being deleted (a NodeClaim that has
// not launched counts its estimate, else its requests), as cluster state
// counts it.
func (v view) NodePoolResources(nodePool string) corev1.ResourceList {
	out := corev1.ResourceList{}
	count := int64(0)
	for _, n := range v.s.Nodes {
		if n.NodePool != nodePool || n.NodeClaim == nil || n.Deleting || n.MarkedForDeletion {
			continue
		}
		count++
		capacity := n.NodeClaim.Status.Capacity
		if n.Node != nil && len(n.Node.Status.Capacity) > 0 {
			capacity = n.Node.Status.Capacity
		}
		if len(capacity) == 0 {
			capacity = n.NodeClaim.Spec.Resources.Requests
		}
		for name, q := range capacity {
			cur := out[name]
			cur.Add(q)
			out[name] = cur
		}
	}
	out[v1.ResourceNodes] = *resource.NewQuantity(count, resource.DecimalSI)
	return out
}

// LeavingNodes implements snapshot.View: the Karpenter nodes being deleted,
// marked for deletion or in a command in flight, or carrying the disrupted
// taint (the queue taints a command's candidates before anything else).
func (v view) LeavingNodes(context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	for _, n := range v.s.Nodes {
		if n.NodeClaim == nil || n.Node == nil {
			continue
		}
		if n.Deleting || n.MarkedForDeletion || n.InQueue || disrupted(n.Node) {
			out[n.Name()] = true
		}
	}
	return out, nil
}

func disrupted(node *corev1.Node) bool {
	for i := range node.Spec.Taints {
		if node.Spec.Taints[i].MatchTaint(&v1.DisruptedNoScheduleTaint) {
			return true
		}
	}
	return false
}

// Pods implements snapshot.View: the pods bound to the nodes, then the
// pending ones.
func (v view) Pods(context.Context) ([]*corev1.Pod, error) {
	n := len(v.s.Pending)
	for _, node := range v.s.Nodes {
		n += len(node.Pods)
	}
	out := make([]*corev1.Pod, 0, n)
	for _, node := range v.s.Nodes {
		out = append(out, node.Pods...)
	}
	return append(out, v.s.Pending...), nil
}

// NodePools implements snapshot.View.
func (v view) NodePools(context.Context) ([]*v1.NodePool, error) {
	out := make([]*v1.NodePool, 0, len(v.s.NodePools))
	for _, name := range sortedPools(v.s) {
		out = append(out, v.s.NodePools[name])
	}
	return out, nil
}

// GetInstanceTypes implements snapshot.View: Snapshot.InstanceTypes.
func (v view) GetInstanceTypes(_ context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return v.s.InstanceTypes[np.Name], nil
}

// DaemonSets implements snapshot.View: Snapshot.DaemonSets.
func (v view) DaemonSets(context.Context) ([]*appsv1.DaemonSet, error) { return v.s.DaemonSets, nil }

// Namespaces implements snapshot.View: a snapshot carries none.
func (v view) Namespaces(context.Context) ([]*corev1.Namespace, error) { return nil, nil }

// Volumes implements snapshot.View: a snapshot carries none.
func (v view) Volumes(context.Context) (*snapshot.Volumes, error) {
	return &snapshot.Volumes{}, nil
}

// ReplicaSet implements snapshot.View: a snapshot carries none, so no
// expected pods are planned.
func (v view) ReplicaSet(context.Context, string, string) (*appsv1.ReplicaSet, error) {
	return nil, nil
}

// ExistingNode is the node as the solver sees it (nil when it has neither
// a Node nor a NodeClaim): once initialized (or unmanaged) the Node's
// labels, taints and allocatable; before that the NodeClaim's labels
// overlaid by the Node's, the NodeClaim's taints and estimate, and its
// requirements.
func (n *Node) ExistingNode() *scheduling.ExistingNode {
	en := &scheduling.ExistingNode{Name: n.Name(), NodeClaim: n.NodeClaimName(), Pods: n.Pods,
		Initialized: n.Initialized || n.NodeClaim == nil, Managed: n.NodeClaim != nil}
	switch {
	case n.Node != nil && en.Initialized:
		en.Labels, en.Taints, en.Allocatable = n.Node.Labels, n.Node.Spec.Taints, n.Node.Status.Allocatable
		return en
	case n.NodeClaim == nil:
		return nil
	}
	en.Labels = map[string]string{}
	for k, v := range n.NodeClaim.Labels {
		en.Labels[k] = v
	}
	en.Taints, en.Allocatable = n.NodeClaim.Spec.Taints, n.NodeClaim.Status.Allocatable
	if n.Node != nil {
		for k, v := range n.Node.Labels {
			en.Labels[k] = v
		}
		if len(en.Allocatable) == 0 {
			en.Allocatable = n.Node.Status.Allocatable
		}
	}
	if len(en.Allocatable) == 0 {
		en.Allocatable = n.NodeClaim.Spec.Resources.Requests
	}
	if reqs, err := cloudprovider.NodeClaimRequirements(n.NodeClaim); err == nil {
		en.Requirements = reqs
	}
	return en
}
