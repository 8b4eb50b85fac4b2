package disruption

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The marks a Strategy keeps on nodes while it works: soft taints that steer
// the kube-scheduler, and a pod-deletion-cost that steers scale-downs. The
// disruption controller puts them where the strategy asks (Strategy.Drain,
// Command.LaunchTaint) and takes them off everywhere else, so that a
// strategy that asks for none (upstream's) leaves no node marked.

// DrainTaint steers pods away from the nodes a strategy drains
// (Strategy.Drain): the kube-scheduler's TaintToleration scoring (weight 3 against
// LeastAllocated's 1) places a pod on such a node only when no other has
// room, and the provisioner treats it as NoSchedule until nothing else
// fits, as upstream treats PreferNoSchedule.
var DrainTaint = corev1.Taint{Key: "karpenter-go.io/draining", Effect: corev1.TaintEffectPreferNoSchedule}

// LaunchTaint steers the kube-scheduler away from the NodeClaims a command
// launches while they come up (Command.LaunchTaint; the planner's commands
// ask for it): the disruption queue
// creates them with it and takes it off as the command deletes its
// candidates (the disruption controller takes it off every node no
// command in flight launched, as after a restart). A new node is the
// emptiest there is, so without it the pods that the same pass's deletes
// evict, placed while it comes up, would fill the room the command
// launched it for, and the command's own pods would need a fresh node.
// Kept while the command's own pods are evicted, it would send them to
// any other node's room first and leave the new nodes half empty.
// PreferNoSchedule: a pod goes there anyway when nothing else has room.
var LaunchTaint = corev1.Taint{Key: "karpenter-go.io/consolidation-launch", Effect: corev1.TaintEffectPreferNoSchedule}

// DrainDeletionCost is the controller.kubernetes.io/pod-deletion-cost
// given to the ReplicaSet pods on the nodes a strategy drains,
// so that a scale-down removes them before their siblings elsewhere: the
// ReplicaSet controller deletes the pods with the lowest cost first. A
// drained node that a scale-down empties goes by Emptiness without an
// eviction; without the cost, scale-downs pick pods across the fleet and
// the node waits, half used, for the payback gate.
const DrainDeletionCost = -1000

// DeletionCostMark holds the pod-deletion-cost the controller set on a
// pod, so that it only ever takes off a cost it set: a pod whose cost someone
// else set, or changed since, keeps it.
const DeletionCostMark = "karpenter-go.io/drain-deletion-cost"

// DeletionCost is p's pod-deletion-cost as the ReplicaSet controller
// reads it: 0 when absent or not an int32.
func DeletionCost(p *corev1.Pod) int32 {
	v, ok := p.Annotations[corev1.PodDeletionCost]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

// DeletionCostPatch returns the annotation changes p needs on a node that
// is drained or not (a nil value removes the key), or nil when it needs
// none. Only pods a ReplicaSet controls get a cost: other controllers
// ignore it.
func DeletionCostPatch(p *corev1.Pod, drained bool) map[string]*string {
	cost, hasCost := p.Annotations[corev1.PodDeletionCost]
	mark, hasMark := p.Annotations[DeletionCostMark]
	ours := hasMark && hasCost && cost == mark
	switch {
	case drained && !hasCost && replicaSetPod(p):
		v := strconv.Itoa(DrainDeletionCost)
		return map[string]*string{corev1.PodDeletionCost: &v, DeletionCostMark: &v}
	case drained && (ours || !hasMark):
		return nil
	case drained:
		// Someone changed the cost we set: it is theirs now.
		return map[string]*string{DeletionCostMark: nil}
	case ours:
		return map[string]*string{corev1.PodDeletionCost: nil, DeletionCostMark: nil}
	case hasMark:
		return map[string]*string{DeletionCostMark: nil}
	}
	return nil
}

// ApplyAnnotations applies a DeletionCostPatch to p in place, with a new
// annotations map (the offline replay's stand-in for the API server's
// merge patch; the controller builds its patch from the result).
func ApplyAnnotations(p *corev1.Pod, patch map[string]*string) {
	if len(patch) == 0 {
		return
	}
	out := make(map[string]string, len(p.Annotations)+len(patch))
	for k, v := range p.Annotations {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	p.Annotations = out
}

func replicaSetPod(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "ReplicaSet"
}
