package disruption_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/disruption"
)

func TestDeletionCostPatch(t *testing.T) {
	yes := true
	rs := []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}}
	job := []metav1.OwnerReference{{Kind: "Job", Name: "batch", Controller: &yes}}
	ours := map[string]string{corev1.PodDeletionCost: "-1000", disruption.DeletionCostMark: "-1000"}
	tests := []struct {
		name        string
		owners      []metav1.OwnerReference
		annotations map[string]string
		drained     bool
		want        map[string]string // after the patch
		none        bool              // no patch at all
	}{
		{name: "a ReplicaSet pod on a drained node gets the cost", owners: rs, drained: true, want: ours},
		{name: "already set: nothing to do", owners: rs, annotations: ours, drained: true, none: true},
		{name: "a cost someone else set is kept", owners: rs, annotations: map[string]string{corev1.PodDeletionCost: "7"}, drained: true, none: true},
		{name: "a pod no ReplicaSet controls gets none", owners: job, drained: true, none: true},
		{name: "off a drained node ours goes", owners: rs, annotations: ours, want: map[string]string{}},
		{name: "a cost changed since is theirs: only the mark goes", owners: rs,
			annotations: map[string]string{corev1.PodDeletionCost: "3", disruption.DeletionCostMark: "-1000"}, drained: true,
			want: map[string]string{corev1.PodDeletionCost: "3"}},
		{name: "off a drained node a changed cost stays", owners: rs,
			annotations: map[string]string{corev1.PodDeletionCost: "3", disruption.DeletionCostMark: "-1000", "a": "b"},
			want:        map[string]string{corev1.PodDeletionCost: "3", "a": "b"}},
		{name: "no cost, not drained: nothing", owners: rs, annotations: map[string]string{"a": "b"}, none: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: tt.owners, Annotations: tt.annotations}}
			patch := disruption.DeletionCostPatch(p, tt.drained)
			if tt.none {
				assert.Nil(t, patch)
				return
			}
			before := map[string]string{}
			for k, v := range tt.annotations {
				before[k] = v
			}
			disruption.ApplyAnnotations(p, patch)
			assert.Equal(t, tt.want, p.Annotations)
			if tt.annotations != nil {
				assert.Equal(t, before, tt.annotations, "the pod's old map is not changed")
			}
		})
	}
}

func TestDeletionCost(t *testing.T) {
	for v, want := range map[string]int32{"-1000": -1000, "12": 12, "x": 0, "99999999999": 0} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.PodDeletionCost: v}}}
		assert.Equal(t, want, disruption.DeletionCost(p), v)
	}
	assert.Zero(t, disruption.DeletionCost(&corev1.Pod{}))
}
