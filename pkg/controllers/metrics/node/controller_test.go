package node_test

import (
	"context"
	"strings"
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
// Only a started (leading) controller publishes, and it keeps no series
// between scrapes.
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
	assert.Zero(t, testutil.CollectAndCount(c), "a controller not started (not leading) publishes nothing")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Start(ctx); close(done) }()
	defer func() { cancel(); clk.Step(node.Interval); <-done }()
	// The pass sets the node gauges before the cluster's utilization:
	// wait for both, or the utilization may be read between them.
	require.Eventually(t, func() bool {
		return testutil.CollectAndCount(c) > 0 && testutil.CollectAndCount(metrics.ClusterUtilizationPercent) > 0
	}, 5*time.Second, 10*time.Millisecond)

	labels := func(resourceType string) string {
		out := "instance_type=m5.large,managed=true,node_name=n1,nodepool=default,phase=Running"
		if resourceType != "" {
			out += ",resource_type=" + resourceType
		}
		return out + ",zone=zone-a"
	}
	got := collect(t, c)
	assert.InDelta(t, 1.9, got["karpenter_nodes_allocatable{"+labels("cpu")+"}"], 1e-9)
	assert.InDelta(t, 7*1024*1024*1024, got["karpenter_nodes_allocatable{"+labels("memory")+"}"], 1)
	assert.InDelta(t, 0.6, got["karpenter_nodes_total_pod_requests{"+labels("cpu")+"}"], 1e-9)
	assert.InDelta(t, 1.2, got["karpenter_nodes_total_pod_limits{"+labels("cpu")+"}"], 1e-9)
	assert.InDelta(t, 0.1, got["karpenter_nodes_total_daemon_requests{"+labels("cpu")+"}"], 1e-9)
	assert.InDelta(t, 0.2, got["karpenter_nodes_total_daemon_limits{"+labels("cpu")+"}"], 1e-9)
	assert.InDelta(t, 0.1, got["karpenter_nodes_system_overhead{"+labels("cpu")+"}"], 1e-9)
	assert.InDelta(t, 90, got["karpenter_nodes_current_lifetime_seconds{"+labels("")+"}"], 1e-9)
	assert.Len(t, got, 9, "every series: %v", got)
	assert.InDelta(t, 100*0.6/1.9, testutil.ToFloat64(metrics.ClusterUtilizationPercent.WithLabelValues("cpu")), 1e-9)
	assert.Equal(t, []string{"instance_type", "nodepool", "zone"}, c.Gauges().LabelNames)
	for _, vec := range c.Gauges().Vecs() {
		assert.Zero(t, testutil.CollectAndCount(vec), "the controller holds no series")
	}

	cluster.DeleteNode("n1")
	assert.Zero(t, testutil.CollectAndCount(c), "series of a deleted node")
	clk.Step(node.Interval)
	require.Eventually(t, func() bool { return testutil.CollectAndCount(metrics.ClusterUtilizationPercent) == 0 }, 5*time.Second, 10*time.Millisecond)
}

// collect scrapes c: each series' value by its name and sorted labels.
func collect(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var pairs []string
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName()+"="+l.GetValue())
			}
			out[f.GetName()+"{"+strings.Join(pairs, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
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
