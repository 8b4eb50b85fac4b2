package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/validation"
)

func TestRuntimeValidate(t *testing.T) {
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirementWithMinValues {
		return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name    string
		mutate  func(*v1.NodePool)
		wantErr string
	}{
		{"valid", func(*v1.NodePool) {}, ""},
		{"restricted label domain", func(np *v1.NodePool) {
			np.Spec.Template.SetLabelMap(map[string]string{"karpenter.sh/custom": "x"})
		}, "restricted"},
		{"hostname label", func(np *v1.NodePool) {
			np.Spec.Template.SetLabelMap(map[string]string{corev1.LabelHostname: "x"})
		}, "restricted"},
		{"bad label value", func(np *v1.NodePool) {
			np.Spec.Template.SetLabelMap(map[string]string{"team": "not a value"})
		}, "invalid value"},
		{"duplicate taint across lists", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "a", Value: "v", Effect: corev1.TaintEffectNoSchedule}}
		}, "duplicate taint"},
		{"bad taint effect", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: "Sometimes"}}
		}, "invalid effect"},
		{"unsupported operator", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{req("team", "Near", "a")}
		}, "unsupported operator"},
		{"In without values", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{req("team", corev1.NodeSelectorOpIn)}
		}, "must have a value defined"},
		{"Gt needs an integer", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{req("cpu", corev1.NodeSelectorOpGt, "x")}
		}, "single positive integer"},
		{"unknown capacity type", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{req(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "cheap")}
		}, "invalid values"},
		{"nodepool key", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{req(v1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "x")}
		}, "karpenter.sh/nodepool"},
		{"beta key normalised", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{req("beta.kubernetes.io/arch", corev1.NodeSelectorOpIn, "amd64")}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := &v1.NodePool{}
			np.Spec.Template.SetLabelMap(map[string]string{"team": "a"})
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")}
			tt.mutate(np)
			err := validation.RuntimeValidate(np)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else if assert.Error(t, err) {
				assert.Contains(t, err.Error(), tt.wantErr)
			}
		})
	}
}
