package node_test

import (
	"context"
	"fmt"
	"strconv"
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
	c, err := node.NewController(cluster, clk, wellKnown)
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

// wellKnown are the label keys of every controller the tests build (the
// gauges are registered once per process, with one set of labels).
var wellKnown = []string{corev1.LabelInstanceTypeStable, v1.NodePoolLabelKey, corev1.LabelTopologyZone}

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

// TestScrapesFollowNodeChanges: a node replaced with other labels, or a
// pod with other requests (as the informer replaces them), is published as
// it is now at the next scrape, though an unchanged node's series are kept
// between scrapes.
func TestScrapesFollowNodeChanges(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	cluster := state.NewCluster(clk, nil, state.Options{})
	c, err := node.NewController(cluster, clk, wellKnown)
	require.NoError(t, err)
	mk := func(zone string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(clk.Now()), Labels: map[string]string{corev1.LabelTopologyZone: zone}},
			Status: corev1.NodeStatus{Phase: corev1.NodeRunning,
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
		}
	}
	cluster.UpdateNode(mk("zone-a"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Start(ctx); close(done) }()
	defer func() { cancel(); clk.Step(node.Interval); <-done }()
	require.Eventually(t, func() bool { return testutil.CollectAndCount(c) > 0 }, 5*time.Second, 10*time.Millisecond)

	series := "karpenter_nodes_allocatable{instance_type=,managed=false,node_name=n1,nodepool=,phase=Running,resource_type=cpu,zone=%s}"
	for range 2 {
		assert.Contains(t, collect(t, c), fmt.Sprintf(series, "zone-a"))
	}
	cluster.UpdateNode(mk("zone-b"))
	got := collect(t, c)
	assert.Contains(t, got, fmt.Sprintf(series, "zone-b"))
	assert.NotContains(t, got, fmt.Sprintf(series, "zone-a"))

	requests := "karpenter_nodes_total_pod_requests{instance_type=,managed=false,node_name=n1,nodepool=,phase=Running,resource_type=cpu,zone=zone-b}"
	cluster.UpdatePod(pod("app", "n1", "500m", "1", nil))
	assert.InDelta(t, 0.5, collect(t, c)[requests], 1e-9)
	cluster.UpdatePod(pod("app", "n1", "700m", "1", nil))
	assert.InDelta(t, 0.7, collect(t, c)[requests], 1e-9, "a pod replaced with other requests")
}

// BenchmarkCollect scrapes the node gauges of 1,000 nodes (ten pods each)
// through a registry, as Prometheus does.
//
//	go test -run '^$' -bench Collect -benchmem ./pkg/controllers/metrics/node/
func BenchmarkCollect(b *testing.B) {
	clk := clocktesting.NewFakeClock(time.Now())
	cluster := state.NewCluster(clk, nil, state.Options{})
	c, err := node.NewController(cluster, clk, wellKnown)
	require.NoError(b, err)
	for i := range 1000 {
		name := fmt.Sprintf("node-%04d", i)
		labels := map[string]string{}
		for _, k := range wellKnown {
			labels[k] = "value-" + strconv.Itoa(i%7)
		}
		cluster.UpdateNode(&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(clk.Now()), Labels: labels},
			Status: corev1.NodeStatus{Phase: corev1.NodeRunning,
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3900m"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("110")}},
		})
		for j := range 10 {
			cluster.UpdatePod(pod(fmt.Sprintf("p-%d-%d", i, j), name, "300m", "500m", nil))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Start(ctx); close(done) }()
	defer func() { cancel(); clk.Step(node.Interval); <-done }()
	require.Eventually(b, func() bool { return testutil.CollectAndCount(c) > 0 }, 5*time.Second, 10*time.Millisecond)
	reg := prometheus.NewRegistry()
	require.NoError(b, reg.Register(c))
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
