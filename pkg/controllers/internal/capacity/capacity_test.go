package capacity_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/capacity"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/testutil"
)

// TestShortfalls: a requested resource short of 90% of the promised
// capacity is reported, one message each, sorted by name.
func TestShortfalls(t *testing.T) {
	nc := &v1.NodeClaim{Spec: v1.NodeClaimSpec{Resources: v1.ResourceRequirements{Requests: testutil.ResourceList("cpu", "1", "memory", "1Gi", "example.com/gpu", "1")}},
		Status: v1.NodeClaimStatus{Capacity: testutil.ResourceList("cpu", "4", "memory", "16Gi", "pods", "110", "example.com/gpu", "2")}}
	tests := []struct {
		name     string
		capacity corev1.ResourceList
		want     []string
	}{
		{"as promised", testutil.ResourceList("cpu", "4", "memory", "16Gi", "pods", "110", "example.com/gpu", "2"), nil},
		{"90% is enough", testutil.ResourceList("cpu", "3600m", "memory", "16Gi", "example.com/gpu", "2"), nil},
		{"memory short", testutil.ResourceList("cpu", "4", "memory", "8Gi", "example.com/gpu", "2"),
			[]string{"expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"}},
		{"unrequested resources do not count", testutil.ResourceList("cpu", "4", "memory", "16Gi", "pods", "10", "example.com/gpu", "2"), nil},
		{"missing resource", testutil.ResourceList("cpu", "3", "memory", "16Gi"), []string{
			"expected 4 of resource cpu, but found 3 (75.0% of expected)",
			"expected 2 of resource example.com/gpu, but found 0 (0.0% of expected)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, capacity.Shortfalls(nc, &corev1.Node{Status: corev1.NodeStatus{Capacity: tt.capacity}}))
		})
	}
}
