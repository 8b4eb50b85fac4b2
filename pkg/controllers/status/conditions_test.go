package status

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestConditionsOf reads the conditions of each kind the controller serves,
// and reads them from the typed object where the kind has typed conditions:
// converting a whole Node to its unstructured form on each heartbeat costs
// hundreds of allocations, reading its conditions a handful.
func TestConditionsOf(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	ready := condition{Type: "Ready", Status: "True", Reason: "Ok", Message: "fine", LastTransitionTime: at}
	drifted := condition{Type: "Drifted", Status: "False", Reason: "NotDrifted", LastTransitionTime: at}
	meta := func(c condition) metav1.Condition {
		return metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransitionTime: metav1.NewTime(c.LastTransitionTime)}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}},
		Spec: corev1.NodeSpec{ProviderID: "kwok://n", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Ok", Message: "fine", LastTransitionTime: metav1.NewTime(at)},
				{Type: "Drifted", Status: corev1.ConditionFalse, Reason: "NotDrifted", LastTransitionTime: metav1.NewTime(at)},
			},
		}}
	nodeClaim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}
	nodeClaim.SetConditions([]metav1.Condition{meta(ready), meta(drifted)})
	nodePool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "np"}}
	nodePool.Status.Conditions = []metav1.Condition{meta(ready), meta(drifted)}
	buffer := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "cb", Namespace: "default"}}
	buffer.Status.Conditions = []metav1.Condition{meta(ready), meta(drifted)}
	want := map[string]condition{"Ready": ready, "Drifted": drifted}
	tests := []struct {
		name      string
		obj       client.Object
		maxAllocs float64
	}{
		{"node", node, 10},
		{"nodeclaim", nodeClaim, 10},
		{"nodepool", nodePool, 10},
		// No typed conditions accessor: read through its unstructured form.
		{"capacitybuffer", buffer, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := conditionsOf(tt.obj)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.LessOrEqual(t, testing.AllocsPerRun(20, func() { _, _ = conditionsOf(tt.obj) }), tt.maxAllocs)
		})
	}
}
