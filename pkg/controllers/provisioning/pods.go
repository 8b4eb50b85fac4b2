package provisioning

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// IsProvisionable reports whether pod may need capacity from Karpenter (see
// snapshot.IsProvisionable, which selects a round's pending pods).
func IsProvisionable(pod *corev1.Pod) bool { return snapshot.IsProvisionable(pod) }
