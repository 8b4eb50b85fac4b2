package hash_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/nodepool/hash"
)

func base() *v1.NodePool {
	np := &v1.NodePool{}
	np.Spec.Template.SetLabelMap(map[string]string{"team": "a"})
	np.Spec.Template.Annotations = map[string]string{"note": "x"}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	np.Spec.Template.Spec.Taints = []corev1.Taint{
		{Key: "a", Effect: corev1.TaintEffectNoSchedule},
		{Key: "b", Value: "1", Effect: corev1.TaintEffectNoExecute},
	}
	np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration("720h")
	np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
	return np
}

func TestNodePoolHash(t *testing.T) {
	want := hash.NodePool(base())
	assert.Regexp(t, `^[0-9]+$`, want)
	tests := []struct {
		name   string
		mutate func(*v1.NodePool)
		same   bool
	}{
		{"unchanged", func(*v1.NodePool) {}, true},
		{"taint order", func(np *v1.NodePool) {
			ts := np.Spec.Template.Spec.Taints
			ts[0], ts[1] = ts[1], ts[0]
		}, true},
		{"duration spelling", func(np *v1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillableDuration("720h0m0s")
		}, true},
		{"requirements are ignored", func(np *v1.NodePool) {
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}
		}, true},
		{"disruption and limits are ignored", func(np *v1.NodePool) {
			np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "50%"}}
			np.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
			np.Spec.Weight = new(int32)
		}, true},
		{"empty and nil annotations", func(np *v1.NodePool) {
			np.Spec.Template.Annotations = map[string]string{"note": "x"}
		}, true},
		{"label value", func(np *v1.NodePool) { np.Spec.Template.SetLabelMap(map[string]string{"team": "b"}) }, false},
		{"annotation", func(np *v1.NodePool) { np.Spec.Template.Annotations["other"] = "y" }, false},
		{"taint value", func(np *v1.NodePool) { np.Spec.Template.Spec.Taints[1].Value = "2" }, false},
		{"startup taint", func(np *v1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "s", Effect: corev1.TaintEffectNoSchedule}}
		}, false},
		{"node class", func(np *v1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" }, false},
		{"expire never", func(np *v1.NodePool) { np.Spec.Template.Spec.ExpireAfter = v1.NeverDuration() }, false},
		{"grace period", func(np *v1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 2 * time.Hour}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := base()
			tt.mutate(np)
			if tt.same {
				assert.Equal(t, want, hash.NodePool(np))
			} else {
				assert.NotEqual(t, want, hash.NodePool(np))
			}
		})
	}
}
