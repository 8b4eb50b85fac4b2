package provisioning

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// ExpectedPodAnnotation marks the pods a round plans for that do not exist
// yet (see snapshot.ExpectedPods).
const ExpectedPodAnnotation = snapshot.ExpectedPodAnnotation

// IsExpected reports whether pod is a placeholder: a pod a ReplicaSet has
// yet to create, or a CapacityBuffer's virtual pod. Placeholders are
// planned for but get no events.
func IsExpected(pod *corev1.Pod) bool { return snapshot.IsExpected(pod) || snapshot.IsVirtual(pod) }
