package capacity_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/capacity"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// TestShortfalls: a requested resource short of 90% of the promised
// capacity is reported, one message each, sorted by name.
func TestShortfalls(t *testing.T) {
	nc := &v1.NodeClaim{Spec: v1.NodeClaimSpec{Resources: v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi", "example.com/gpu", "1")}},
		Status: v1.NodeClaimStatus{Capacity: rl("cpu", "4", "memory", "16Gi", "pods", "110", "example.com/gpu", "2")}}
	tests := []struct {
		name     string
		capacity corev1.ResourceList
		want     []string
	}{
		{"as promised", rl("cpu", "4", "memory", "16Gi", "pods", "110", "example.com/gpu", "2"), nil},
		{"90% is enough", rl("cpu", "3600m", "memory", "16Gi", "example.com/gpu", "2"), nil},
		{"memory short", rl("cpu", "4", "memory", "8Gi", "example.com/gpu", "2"),
			[]string{"expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"}},
		{"unrequested resources do not count", rl("cpu", "4", "memory", "16Gi", "pods", "10", "example.com/gpu", "2"), nil},
		{"missing resource", rl("cpu", "3", "memory", "16Gi"), []string{
			"expected 4 of resource cpu, but found 3 (75.0% of expected)",
			"expected 2 of resource example.com/gpu, but found 0 (0.0% of expected)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, capacity.Shortfalls(nc, &corev1.Node{Status: corev1.NodeStatus{Capacity: tt.capacity}}))
		})
	}
}
