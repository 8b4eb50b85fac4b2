package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
)

// withBuffer adds a CapacityBuffer of replicas pods of cpu each, as the
// controller leaves it (resolved or not), and its template.
func withBuffer(o *Objects, resolved bool, replicas int32, cpu string) *Objects {
	cb := v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "default", UID: "warm-uid"}}
	cb.Spec.PodTemplateRef = &v1beta1.LocalObjectRef{Name: "chunk"}
	cb.Spec.Replicas = &replicas
	status := metav1.ConditionFalse
	if resolved {
		status = metav1.ConditionTrue
		cb.Status.Replicas = &replicas
	}
	cb.SetCondition(v1beta1.ReadyForProvisioningCondition, status, "Resolved", "")
	o.CapacityBuffers = append(o.CapacityBuffers, cb)
	o.BufferTemplates = append(o.BufferTemplates, corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "default"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}}})
	return o
}

// TestSessionPlansCapacityBuffers: the CLI plans for the virtual pods of
// the CapacityBuffers the controller resolved, as its provisioning rounds
// do: simulate buys room for them (and does not count them as pending
// pods nobody can take), and why node says a node holding them is kept,
// as the disruption controller keeps it; a buffer the controller has not
// resolved (the gate off) changes nothing.
func TestSessionPlansCapacityBuffers(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name           string
		objects        *Objects
		wantBufferPods int
		wantClaimPods  int // pods on the NodeClaims simulate plans
		node           string
		wantNominated  bool
	}{
		{name: "resolved buffer, no node: room is bought", objects: withBuffer(syntheticObjects(0, 0), true, 3, "1"),
			wantBufferPods: 3, wantClaimPods: 3},
		{name: "unresolved buffer: nothing planned", objects: withBuffer(syntheticObjects(0, 0), false, 3, "1")},
		{name: "resolved buffer fits an empty node: the node is held", objects: withBuffer(syntheticObjects(1, 0), true, 1, "1"),
			wantBufferPods: 1, node: "node-00000", wantNominated: true},
		{name: "no buffer: the empty node is not held", objects: syntheticObjects(1, 0), node: "node-00000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(tc.objects, Options{})
			require.NoError(t, err)
			ans, err := s.Simulate(ctx, &Changes{})
			require.NoError(t, err)
			require.Equal(t, tc.wantBufferPods, ans.BufferPods)
			require.Equal(t, 1, ans.Unschedulable, "only the arm64 pod")
			pods := 0
			for _, nc := range ans.NodeClaims {
				pods += nc.Pods
			}
			require.Equal(t, tc.wantClaimPods, pods)
			if tc.node == "" {
				return
			}
			node, err := s.WhyNode(ctx, tc.node)
			require.NoError(t, err)
			nominated := false
			for _, v := range node.Verdicts {
				nominated = nominated || v.Kind == "Nominated"
			}
			require.Equal(t, tc.wantNominated, nominated, "%+v", node)
		})
	}
}
