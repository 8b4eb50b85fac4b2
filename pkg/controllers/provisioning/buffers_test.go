package provisioning_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	"github.com/karpenter-go/karpenter/pkg/controllers/provisioning"
	"github.com/karpenter-go/karpenter/pkg/providers/kwok"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// buffer creates a CapacityBuffer whose status says it resolved (or not)
// to replicas.
func buffer(t *testing.T, name string, resolved bool, replicas int32) *v1beta1.CapacityBuffer {
	t.Helper()
	ctx := context.Background()
	cb := &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: name}, Replicas: &replicas}}
	require.NoError(t, cp.Client.Create(ctx, cb))
	t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), cb) })
	status := metav1.ConditionFalse
	if resolved {
		status = metav1.ConditionTrue
	}
	cb.SetCondition(v1beta1.ReadyForProvisioningCondition, status, "Resolved", "")
	cb.Status.Replicas = &replicas
	require.NoError(t, cp.Client.Status().Update(ctx, cb))
	return cb
}

// virtualPods are n virtual pods of the buffer, as the CapacityBuffer
// controller publishes them.
func virtualPods(cb *v1beta1.CapacityBuffer, n int, cpu string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-buffer-%d", cb.Name, i), Namespace: cb.Namespace,
				UID: types.UID(fmt.Sprintf("%s-buffer-%d", cb.UID, i)),
				Annotations: map[string]string{v1beta1.FakePodAnnotationKey: v1beta1.FakePodAnnotationValue,
					v1beta1.BufferNameAnnotation: cb.Name, v1beta1.BufferNamespaceAnnotation: cb.Namespace}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
				Tolerations: []corev1.Toleration{{Key: "example.io/dedicated", Operator: corev1.TolerationOpExists}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		})
	}
	return out
}

// TestBufferProvisioningCondition: after each round every CapacityBuffer
// gets upstream's Provisioning condition: a buffer whose virtual pods the
// round launched new NodeClaims for RequiresNewCapacity, and once those are
// in flight FitsExistingCapacity; a buffer that is not resolved is
// NotReadyForProvisioning and one resolved to no replicas BufferEmpty,
// whatever the round planned.
func TestBufferProvisioningCondition(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "buffered", nil)
	warm := buffer(t, "warm", true, 2)
	unresolved := buffer(t, "unresolved", false, 0)
	empty := buffer(t, "empty", true, 0)
	buffers := state.NewBuffers()
	buffers.Set(client.ObjectKeyFromObject(warm), virtualPods(warm, 2, "1"))
	cloud, err := kwok.New(ctx, cp.Client, kwok.Options{})
	require.NoError(t, err)
	p := provisioning.NewProvisioner(cp.Client, cloud, &fakeCluster{kube: cp.Client}, &fakeRecorder{}, provisioning.Options{Buffers: buffers})

	type want struct {
		status          metav1.ConditionStatus
		reason, message string
	}
	check := func(round string, wants map[*v1beta1.CapacityBuffer]want) {
		t.Helper()
		for cb, w := range wants {
			got := &v1beta1.CapacityBuffer{}
			require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(cb), got))
			c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ProvisioningCondition)
			require.NotNil(t, c, "%s: %s has no Provisioning condition", round, cb.Name)
			assert.Equal(t, w, want{c.Status, c.Reason, c.Message}, "%s: %s", round, cb.Name)
		}
	}
	notReady := want{metav1.ConditionFalse, provisioning.ReasonNotReadyForProvisioning, "Buffer is not ReadyForProvisioning"}
	bufferEmpty := want{metav1.ConditionFalse, provisioning.ReasonBufferEmpty, "Buffer has zero desired replicas"}

	round, err := p.Provision(ctx)
	require.NoError(t, err)
	require.Len(t, round.NodeClaims, 1, "the buffer's room is bought")
	check("first round", map[*v1beta1.CapacityBuffer]want{
		warm:       {metav1.ConditionFalse, provisioning.ReasonRequiresNewCapacity, "2/2 virtual pods required new capacity, 0 failed"},
		unresolved: notReady, empty: bufferEmpty,
	})

	// The NodeClaim launched: the next round finds the room in flight.
	nc := round.NodeClaims[0]
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("58")}
	nc.Status.Allocatable = nc.Status.Capacity
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	round, err = p.Provision(ctx)
	require.NoError(t, err)
	require.Empty(t, round.Result.NewNodeClaims)
	check("second round", map[*v1beta1.CapacityBuffer]want{
		warm:       {metav1.ConditionTrue, provisioning.ReasonFitsExistingCapacity, "All 2 virtual pods fit on existing capacity"},
		unresolved: notReady, empty: bufferEmpty,
	})
}
