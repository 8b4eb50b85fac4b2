package node_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/metrics/node"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// TestGauges publishes one managed node with a workload pod and a
// DaemonSet pod: allocatable, requests and limits (pods' including the
// DaemonSet's), overhead, lifetime and cluster utilization have the
// expected values and labels; once the node is gone its series are too.
func TestGauges(t *testing.T) {
	now := time.Now()
	clk := clocktesting.NewFakeClock(now)
	cluster := state.NewCluster(clk, nil, state.Options{})
	c, err := node.NewController(cluster, clk, []string{corev1.LabelInstanceTypeStable, v1.NodePoolLabelKey, corev1.LabelTopologyZone})
	require.NoError(t, err)

	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second)), Labels: map[string]string{
			corev1.LabelInstanceTypeStable: "m5.large", v1.NodePoolLabelKey: "default", corev1.LabelTopologyZone: "zone-a",
		}},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodeRunning,
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m"), corev1.ResourceMemory: resource.MustParse("7Gi")},
		},
	}
	cluster.UpdateNode(n)
	cluster.UpdatePod(pod("app", "n1", "500m", "1", nil))
	cluster.UpdatePod(pod("agent", "n1", "100m", "200m", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr(true)}}))
	c.Reconcile()

	labels := func(resourceType string) []string {
		out := []string{"m5.large", "default", "zone-a", "n1", "Running", "true"}
		if resourceType != "" {
			out = append(out, resourceType)
		}
		return out
	}
	g := gauges(t, c)
	assert.InDelta(t, 1.9, testutil.ToFloat64(g.Allocatable.WithLabelValues(labels("cpu")...)), 1e-9)
	assert.InDelta(t, 7*1024*1024*1024, testutil.ToFloat64(g.Allocatable.WithLabelValues(labels("memory")...)), 1)
	assert.InDelta(t, 0.6, testutil.ToFloat64(g.TotalPodRequests.WithLabelValues(labels("cpu")...)), 1e-9)
	assert.InDelta(t, 1.2, testutil.ToFloat64(g.TotalPodLimits.WithLabelValues(labels("cpu")...)), 1e-9)
	assert.InDelta(t, 0.1, testutil.ToFloat64(g.TotalDaemonRequests.WithLabelValues(labels("cpu")...)), 1e-9)
	assert.InDelta(t, 0.2, testutil.ToFloat64(g.TotalDaemonLimits.WithLabelValues(labels("cpu")...)), 1e-9)
	assert.InDelta(t, 0.1, testutil.ToFloat64(g.SystemOverhead.WithLabelValues(labels("cpu")...)), 1e-9)
	assert.InDelta(t, 90, testutil.ToFloat64(g.Lifetime.WithLabelValues(labels("")...)), 1e-9)
	assert.InDelta(t, 100*0.6/1.9, testutil.ToFloat64(metrics.ClusterUtilizationPercent.WithLabelValues("cpu")), 1e-9)
	assert.Equal(t, []string{"instance_type", "nodepool", "zone"}, g.LabelNames)

	cluster.DeleteNode("n1")
	c.Reconcile()
	for _, vec := range []*prometheus.GaugeVec{g.Allocatable, g.TotalPodRequests, g.TotalPodLimits, g.TotalDaemonRequests, g.TotalDaemonLimits, g.SystemOverhead, g.Lifetime} {
		assert.Zero(t, testutil.CollectAndCount(vec), "series of a deleted node")
	}
	assert.Zero(t, testutil.CollectAndCount(metrics.ClusterUtilizationPercent))
}

func gauges(t *testing.T, c *node.Controller) *metrics.NodeGauges {
	t.Helper()
	return c.Gauges()
}

func pod(name, nodeName, cpu, cpuLimit string, owners []metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: owners},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLimit)},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func ptr[T any](v T) *T { return &v }
