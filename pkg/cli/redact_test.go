package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
)

// TestRedactCoversEveryKind: a credential-looking annotation is redacted
// on every kind a snapshot lists, the cluster-scoped ones included.
func TestRedactCoversEveryKind(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Annotations: map[string]string{"example.com/api-token": "tok-value", "example.com/owner": "team-a"}}
	}
	o := &Objects{
		NodeOverlays:    []v1alpha1.NodeOverlay{{ObjectMeta: meta("overlay")}},
		EC2NodeClasses:  []awsv1.EC2NodeClass{{ObjectMeta: meta("class")}},
		CapacityBuffers: []v1beta1.CapacityBuffer{{ObjectMeta: meta("buffer")}},
		BufferTemplates: []corev1.PodTemplate{{ObjectMeta: meta("template"), Template: corev1.PodTemplateSpec{ObjectMeta: meta("template-pod"),
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "PASSWORD", Value: "hunter2"}}}}}}}},
	}
	o.Redact()
	require.Equal(t, Redacted, o.BufferTemplates[0].Template.Spec.Containers[0].Env[0].Value, "a buffer template's env value")
	for _, m := range []metav1.ObjectMeta{o.NodeOverlays[0].ObjectMeta, o.EC2NodeClasses[0].ObjectMeta, o.CapacityBuffers[0].ObjectMeta,
		o.BufferTemplates[0].ObjectMeta, o.BufferTemplates[0].Template.ObjectMeta} {
		require.Equal(t, Redacted, m.Annotations["example.com/api-token"], m.Name)
		require.Equal(t, "team-a", m.Annotations["example.com/owner"], m.Name)
	}
}
