package metrics

import (
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestRegistry touches every metric once (vectors only appear in a gather
// once a series exists) and checks names, types and label sets against
// upstream's.
func TestRegistry(t *testing.T) {
	SetBuildInfo("v0.0.0-test", "abc123")
	NodeClaimsCreatedTotal.WithLabelValues(ProvisionedReason, "default", "false").Inc()
	NodeClaimsTerminatedTotal.WithLabelValues("default", "spot", "zone-a").Inc()
	NodesCreatedTotal.WithLabelValues("default", "zone-a").Inc()
	NodesTerminatedTotal.WithLabelValues("default", "zone-a").Inc()
	PodState.WithLabelValues("p", "ns", "ReplicaSet/x", "n", "default", "zone-a", "amd64", "spot", "m5.large", "Running").Set(1)
	SchedulingDurationSeconds.WithLabelValues("provisioner").Observe(0.1)
	UnschedulablePodsCount.WithLabelValues("provisioner").Set(2)
	IgnoredPodsCount.Set(0)
	CloudProviderDurationSeconds.WithLabelValues("nodeclaim.lifecycle", "Create", "kwok").Observe(0.01)
	CloudProviderErrorsTotal.WithLabelValues("nodeclaim.lifecycle", "Create", "kwok", "InsufficientCapacityError").Inc()
	ClusterStateSynced.Set(1)
	ClusterStateNodeCount.Set(3)
	NodePoolUsage.WithLabelValues("default", "cpu").Set(4)
	NodePoolLimit.WithLabelValues("default", "cpu").Set(100)
	NodePoolCostPerHour.WithLabelValues("default").Set(1.5)
	NodePoolUnpricedNodes.WithLabelValues("default").Set(0)
	NodePoolIdleCostPerHour.WithLabelValues("default").Set(0.5)

	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	tests := []struct {
		name   string
		typ    dto.MetricType
		labels []string
	}{
		{"karpenter_build_info", dto.MetricType_GAUGE, []string{"commit", "goarch", "goversion", "version"}},
		{"karpenter_nodeclaims_created_total", dto.MetricType_COUNTER, []string{"min_values_relaxed", "nodepool", "reason"}},
		{"karpenter_nodeclaims_terminated_total", dto.MetricType_COUNTER, []string{"capacity_type", "nodepool", "zone"}},
		{"karpenter_nodes_created_total", dto.MetricType_COUNTER, []string{"nodepool", "zone"}},
		{"karpenter_nodes_terminated_total", dto.MetricType_COUNTER, []string{"nodepool", "zone"}},
		{"karpenter_pods_state", dto.MetricType_GAUGE, []string{"arch", "capacity_type", "instance_type", "name", "namespace", "node", "nodepool", "owner", "phase", "zone"}},
		{"karpenter_scheduler_scheduling_duration_seconds", dto.MetricType_HISTOGRAM, []string{"controller"}},
		{"karpenter_scheduler_unschedulable_pods_count", dto.MetricType_GAUGE, []string{"controller"}},
		{"karpenter_scheduler_ignored_pods_count", dto.MetricType_GAUGE, nil},
		{"karpenter_cloudprovider_duration_seconds", dto.MetricType_HISTOGRAM, []string{"controller", "method", "provider"}},
		{"karpenter_cloudprovider_errors_total", dto.MetricType_COUNTER, []string{"controller", "error", "method", "provider"}},
		{"karpenter_cluster_state_synced", dto.MetricType_GAUGE, nil},
		{"karpenter_cluster_state_node_count", dto.MetricType_GAUGE, nil},
		{"karpenter_cluster_state_unsynced_time_seconds", dto.MetricType_GAUGE, nil},
		{"karpenter_nodepools_usage", dto.MetricType_GAUGE, []string{"nodepool", "resource_type"}},
		{"karpenter_nodepools_limit", dto.MetricType_GAUGE, []string{"nodepool", "resource_type"}},
		{"karpenter_nodepools_cost_per_hour", dto.MetricType_GAUGE, []string{"nodepool"}},
		{"karpenter_nodepools_unpriced_nodes", dto.MetricType_GAUGE, []string{"nodepool"}},
		{"karpenter_nodepools_idle_cost_per_hour", dto.MetricType_GAUGE, []string{"nodepool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := got[tt.name]
			require.True(t, ok, "metric %s not registered", tt.name)
			assert.Equal(t, tt.typ, f.GetType())
			require.NotEmpty(t, f.GetMetric())
			var labels []string
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
			sort.Strings(labels)
			assert.Equal(t, tt.labels, labels)
		})
	}
	assert.Len(t, Collectors(), len(tests))
}

func TestMeasure(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: DurationBuckets()})
	Measure(h)()
	m := &dto.Metric{}
	require.NoError(t, h.Write(m))
	assert.Equal(t, uint64(1), m.GetHistogram().GetSampleCount())
}
