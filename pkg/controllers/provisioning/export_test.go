package provisioning

import corev1 "k8s.io/api/core/v1"

// TriggerKey exposes the batcher key a pod triggers with.
var TriggerKey = (*Provisioner).triggerKey

// WhyPlanned exposes why a round planned for a pod, as its log line says.
func WhyPlanned(pod *corev1.Pod) string { return string(whyPlanned(pod)) }
