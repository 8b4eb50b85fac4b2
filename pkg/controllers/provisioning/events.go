package provisioning

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Event reasons (upstream's strings).
const (
	ReasonNominated        = "Nominated"
	ReasonFailedScheduling = "FailedScheduling"
)

// nominate tells the pod where it is expected to land. targets are
// "node/<name>" or "nodeclaim/<name>".
func nominate(r Recorder, pod *corev1.Pod, targets ...string) {
	r.Eventf(pod, corev1.EventTypeNormal, ReasonNominated, "Pod should schedule on: %s", strings.Join(targets, ", "))
}

// failedScheduling explains why no capacity can be planned for the pod.
func failedScheduling(r Recorder, pod *corev1.Pod, reason string) {
	r.Eventf(pod, corev1.EventTypeWarning, ReasonFailedScheduling, "Failed to schedule pod, %s", reason)
}
