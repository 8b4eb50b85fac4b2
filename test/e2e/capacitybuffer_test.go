package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/apis/autoscaling/v1beta1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// chunksThatFit counts how many pods requesting cpu would fit the free CPU
// of the pool's initialized nodes (allocatable minus the requests of the
// pods bound there).
func chunksThatFit(ctx context.Context, cp *controlplane.ControlPlane, pool string, cpu resource.Quantity) int {
	var pods corev1.PodList
	if err := cp.Client.List(ctx, &pods); err != nil {
		return -1
	}
	used := map[string]int64{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			used[p.Spec.NodeName] += c.Resources.Requests.Cpu().MilliValue()
		}
	}
	n := 0
	for _, nc := range liveClaims(ctx, cp, pool) {
		if !conditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
			continue
		}
		node := &corev1.Node{}
		if cp.Client.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node) != nil {
			continue
		}
		free := node.Status.Allocatable.Cpu().MilliValue() - used[node.Name]
		n += int(free / cpu.MilliValue())
	}
	return n
}

// TestCapacityBuffer runs the controller with
// --feature-gates=CapacityBuffer=true: a CapacityBuffer of 3 replicas of a
// 2-CPU PodTemplate (pinned to the pool cb) gets Ready and room for 3 such
// pods is launched, and the buffer reports Provisioning=True
// (FitsExistingCapacity) in its status and the operator_capacitybuffer_*
// series; after two 1-CPU pods take some of it the room is
// bought again, and it stays through consolidation passes; once the
// buffer is deleted consolidation takes the room back.
func TestCapacityBuffer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp := cluster(t)
	applyExamples(t, ctx, cp, "02-kwoknodeclass.yaml")
	const pool = "cb"
	chunk := resource.MustParse("2")
	template := &corev1.PodTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PodTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: "default"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector: map[string]string{e2ePoolLabel: pool},
			Containers: []corev1.Container{{Name: "pause", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: chunk, corev1.ResourceMemory: resource.MustParse("128Mi")},
			}}},
		}},
	}
	replicas := int32(3)
	buffer := &v1beta1.CapacityBuffer{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "CapacityBuffer"},
		ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "default"},
		Spec: v1beta1.CapacityBufferSpec{
			PodTemplateRef: &v1beta1.LocalObjectRef{Name: "chunk"},
			Replicas:       &replicas,
		},
	}
	applyAll(t, ctx, cp,
		consolidationPool{name: pool, instanceTypes: []string{"c7a.xlarge", "c7a.2xlarge"}}.yaml(),
		manifest(template), manifest(buffer),
	)
	_, metricsPort := startMetricsController(t, cp, "controller", nil, "--feature-gates=CapacityBuffer=true")

	require.Eventually(t, func() bool {
		got := &v1beta1.CapacityBuffer{}
		if cp.Client.Get(ctx, client.ObjectKeyFromObject(buffer), got) != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ReadyForProvisioningCondition)
		return c != nil && c.Status == metav1.ConditionTrue && got.Status.Replicas != nil && *got.Status.Replicas == 3 &&
			got.Status.PodTemplateRef != nil && got.Status.PodTemplateRef.Name == "chunk"
	}, time.Minute, time.Second, "the buffer should resolve to 3 replicas of PodTemplate chunk")
	require.Eventually(t, func() bool { return chunksThatFit(ctx, cp, pool, chunk) >= 3 }, 2*time.Minute, time.Second,
		"room for 3 buffer replicas should be launched")
	// Status as upstream's: once a round finds the room, Provisioning is
	// True (FitsExistingCapacity), and the operator_capacitybuffer_*
	// series publish it.
	require.Eventually(t, func() bool {
		got := &v1beta1.CapacityBuffer{}
		if cp.Client.Get(ctx, client.ObjectKeyFromObject(buffer), got) != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1beta1.ProvisioningCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "FitsExistingCapacity" &&
			c.Message == "All 3 virtual pods fit on existing capacity"
	}, time.Minute, time.Second, "the buffer should report Provisioning=True, FitsExistingCapacity")
	require.Eventually(t, func() bool {
		samples, err := scrapeMetrics(ctx, metricsPort)
		if err != nil {
			return false
		}
		v, ok := metricValue(samples, "operator_capacitybuffer_status_condition_count", map[string]string{
			"namespace": "default", "name": "warm", "type": v1beta1.ProvisioningCondition, "status": "True", "reason": "FitsExistingCapacity"})
		return ok && v == 1
	}, 30*time.Second, time.Second, "operator_capacitybuffer_status_condition_count should publish the condition")

	applyAll(t, ctx, cp, consolidationWorkload{name: pool + "-app", pool: pool, replicas: 2, cpu: "1"}.yaml())
	require.Eventually(t, func() bool {
		return countPods(readyPods(ctx, cp, pool+"-app")) == 2 && chunksThatFit(ctx, cp, pool, chunk) >= 3
	}, 2*time.Minute, time.Second, "after two 1-CPU pods run, room for 3 buffer replicas should be there again")

	// Consolidation passes run every few seconds with consolidateAfter 0s:
	// the room stays through them.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		require.GreaterOrEqual(t, chunksThatFit(ctx, cp, pool, chunk), 3, "consolidation took the buffer's room")
		time.Sleep(2 * time.Second)
	}

	require.NoError(t, cp.Client.Delete(ctx, buffer))
	require.Eventually(t, func() bool {
		return countPods(readyPods(ctx, cp, pool+"-app")) == 2 && chunksThatFit(ctx, cp, pool, chunk) < 3
	}, 3*time.Minute, time.Second, "without the buffer, consolidation should take the room")
}
