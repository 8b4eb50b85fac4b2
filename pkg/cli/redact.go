package cli

import (
	"regexp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Redacted replaces every value Redact removes, so that a reader of a
// snapshot sees that something was there.
const Redacted = "REDACTED"

// credentialKey matches annotation keys whose values are commonly secrets
// (tokens, passwords, keys) or copies of whole objects that may hold them
// (kubectl's last-applied-configuration carries a pod's env values).
var credentialKey = regexp.MustCompile(`(?i)(token|secret|passw(or)?d|credential|api[-_.]?key|access[-_.]?key|private[-_.]?key|auth|last-applied-configuration)`)

// credentialValue matches values that are credentials whatever their key:
// AWS access key IDs, bearer tokens, PEM private keys.
var credentialValue = regexp.MustCompile(`(^|[^A-Z0-9])(AKIA|ASIA)[A-Z0-9]{16}|(?i)bearer\s+\S|-----BEGIN [A-Z ]*PRIVATE KEY-----`)

// Redact removes from the snapshot what a user should not have to vet
// before attaching it to a bug report: the literal value of every
// container environment variable (pods, DaemonSet and CapacityBuffer templates; valueFrom
// references keep only the names they point at) and annotations that look
// like credentials. No answer reads them: scheduling, disruption and
// simulation read requests, labels, taints and owners. The snapshot lists
// no Secrets or ConfigMaps at all.
func (o *Objects) Redact() {
	for i := range o.Pods {
		redactPodSpec(&o.Pods[i].Spec)
		redactMeta(&o.Pods[i].ObjectMeta)
	}
	for i := range o.DaemonSets {
		redactPodSpec(&o.DaemonSets[i].Spec.Template.Spec)
		redactMeta(&o.DaemonSets[i].Spec.Template.ObjectMeta)
		redactMeta(&o.DaemonSets[i].ObjectMeta)
	}
	for i := range o.NodePools {
		redactMeta(&o.NodePools[i].ObjectMeta)
	}
	for i := range o.NodeClaims {
		redactMeta(&o.NodeClaims[i].ObjectMeta)
	}
	for i := range o.Nodes {
		redactMeta(&o.Nodes[i].ObjectMeta)
	}
	for i := range o.Namespaces {
		redactMeta(&o.Namespaces[i].ObjectMeta)
	}
	for i := range o.PodDisruptionBudgets {
		redactMeta(&o.PodDisruptionBudgets[i].ObjectMeta)
	}
	for i := range o.PersistentVolumeClaims {
		redactMeta(&o.PersistentVolumeClaims[i].ObjectMeta)
	}
	for i := range o.PersistentVolumes {
		redactMeta(&o.PersistentVolumes[i].ObjectMeta)
	}
	for i := range o.StorageClasses {
		redactMeta(&o.StorageClasses[i].ObjectMeta)
	}
	for i := range o.EC2NodeClasses {
		redactMeta(&o.EC2NodeClasses[i].ObjectMeta)
	}
	for i := range o.NodeOverlays {
		redactMeta(&o.NodeOverlays[i].ObjectMeta)
	}
	for i := range o.CapacityBuffers {
		redactMeta(&o.CapacityBuffers[i].ObjectMeta)
	}
	for i := range o.BufferTemplates {
		redactPodSpec(&o.BufferTemplates[i].Template.Spec)
		redactMeta(&o.BufferTemplates[i].Template.ObjectMeta)
		redactMeta(&o.BufferTemplates[i].ObjectMeta)
	}
	for i := range o.NominationEvents {
		redactMeta(&o.NominationEvents[i].ObjectMeta)
	}
}

func redactPodSpec(spec *corev1.PodSpec) {
	env := func(vars []corev1.EnvVar) {
		for i := range vars {
			if vars[i].Value != "" {
				vars[i].Value = Redacted
			}
		}
	}
	for i := range spec.InitContainers {
		env(spec.InitContainers[i].Env)
	}
	for i := range spec.Containers {
		env(spec.Containers[i].Env)
	}
	for i := range spec.EphemeralContainers {
		env(spec.EphemeralContainers[i].Env)
	}
}

func redactMeta(m *metav1.ObjectMeta) {
	if m == nil {
		return
	}
	for k, v := range m.Annotations {
		if credentialKey.MatchString(k) || credentialValue.MatchString(v) {
			m.Annotations[k] = Redacted
		}
	}
}
