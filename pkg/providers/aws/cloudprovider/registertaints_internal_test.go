package cloudprovider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestRegisterTaints: the user data registers the node with the
// NodeClaim's taints and startup taints plus the unregistered taint,
// which a NodeClaim that names it already does not get twice.
func TestRegisterTaints(t *testing.T) {
	dedicated := corev1.Taint{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name           string
		taints, starts []corev1.Taint
		want           []corev1.Taint
	}{
		{"none of its own", nil, nil, []corev1.Taint{v1.UnregisteredNoExecuteTaint}},
		{"taints, then startup taints, then unregistered", []corev1.Taint{dedicated}, []corev1.Taint{startup},
			[]corev1.Taint{dedicated, startup, v1.UnregisteredNoExecuteTaint}},
		{"named as a startup taint already", nil, []corev1.Taint{startup, v1.UnregisteredNoExecuteTaint},
			[]corev1.Taint{startup, v1.UnregisteredNoExecuteTaint}},
		{"named as a taint already", []corev1.Taint{v1.UnregisteredNoExecuteTaint}, nil,
			[]corev1.Taint{v1.UnregisteredNoExecuteTaint}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := &v1.NodeClaim{Spec: v1.NodeClaimSpec{Taints: tc.taints, StartupTaints: tc.starts}}
			assert.Equal(t, tc.want, registerTaints(nc))
			assert.Len(t, nc.Spec.Taints, len(tc.taints), "the NodeClaim's own list is left alone")
		})
	}
}
