package v1

import corev1 "k8s.io/api/core/v1"

// Taints Karpenter puts on nodes.
const (
	// DisruptedTaintKey is put on nodes that a disruption command (or
	// termination) is about to remove, so no new pods land there. It is
	// removed again if the command is abandoned.
	DisruptedTaintKey = Group + "/disrupted"
	// UnregisteredTaintKey must be on a node when its kubelet registers (the
	// bootstrap adds it); Karpenter removes it once it has synced the
	// NodeClaim's labels and taints onto the node.
	UnregisteredTaintKey = Group + "/unregistered"
)

var (
	// DisruptedNoScheduleTaint is the taint form of DisruptedTaintKey.
	DisruptedNoScheduleTaint = corev1.Taint{Key: DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}
	// UnregisteredNoExecuteTaint is the taint form of UnregisteredTaintKey.
	UnregisteredNoExecuteTaint = corev1.Taint{Key: UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
)
