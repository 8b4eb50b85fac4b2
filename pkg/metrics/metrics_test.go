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
	PodState.SetSource(func(emit func(float64, ...string)) {
		emit(1, "p", "ns", "/apis/apps/v1/namespaces/ns/replicasets/x", "n", "true", "default", "zone-a", "amd64", "spot", "m5.large", "Running", "true", "true")
	})
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
	NodePoolCostTotal.WithLabelValues("default").Set(1.5)
	NodePoolCostTrackerErrorsTotal.WithLabelValues("default", "default-abc").Inc()

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
		{"karpenter_pods_state", dto.MetricType_GAUGE, []string{"arch", "capacity_type", "instance_type", "managed", "name", "namespace", "node", "nodepool", "owner", "phase", "ready", "scheduled", "zone"}},
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
		{"karpenter_nodepools_cost_total", dto.MetricType_GAUGE, []string{"nodepool"}},
		{"karpenter_nodepools_cost_tracker_errors_total", dto.MetricType_COUNTER, []string{"nodeclaim", "nodepool"}},
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

// TestUpstreamLabelsAndBuckets checks the metrics added for upstream's
// dashboards against upstream's label sets, types and buckets.
func TestUpstreamLabelsAndBuckets(t *testing.T) {
	exp := func(start, factor float64, n int) []float64 { return prometheus.ExponentialBuckets(start, factor, n) }
	tests := []struct {
		name    string
		typ     string
		labels  []string
		buckets []float64
	}{
		{"karpenter_cluster_utilization_percent", "gauge", []string{"resource_type"}, nil},
		{"karpenter_nodes_termination_duration_seconds", "summary", []string{"nodepool"}, nil},
		{"karpenter_nodes_drained_total", "counter", []string{"nodepool"}, nil},
		{"karpenter_nodes_lifetime_duration_seconds", "histogram", []string{"nodepool"}, []float64{900, 1800, 2700, 3600, 7200, 14400, 21600, 28800, 36000, 43200, 57600, 72000, 86400, 172800, 259200, 432000, 864000, 1296000, 1728000, 2160000, 2592000}},
		{"karpenter_nodeclaims_instance_termination_duration_seconds", "histogram", []string{"nodepool"}, exp(1, 2, 11)},
		{"karpenter_nodeclaims_termination_duration_seconds", "histogram", []string{"nodepool"}, exp(1, 2, 12)},
		{"karpenter_pods_eviction_requests_total", "counter", []string{"code"}, nil},
		{"karpenter_pods_drained_total", "counter", []string{"reason"}, nil},
		{"karpenter_cloudprovider_instance_termination_failures_total", "counter", []string{"zone", "zone_id"}, nil},
		{"karpenter_pods_startup_duration_seconds", "summary", nil, nil},
		{"karpenter_pods_bound_duration_seconds", "histogram", nil, DurationBuckets()},
		{"karpenter_pods_unbound_time_seconds", "gauge", []string{"name", "namespace"}, nil},
		{"karpenter_pods_unstarted_time_seconds", "gauge", []string{"name", "namespace"}, nil},
		{"karpenter_pods_provisioning_bound_duration_seconds", "histogram", nil, DurationBuckets()},
		{"karpenter_pods_provisioning_startup_duration_seconds", "histogram", nil, DurationBuckets()},
		{"karpenter_pods_provisioning_unbound_time_seconds", "gauge", []string{"name", "namespace"}, nil},
		{"karpenter_pods_provisioning_unstarted_time_seconds", "gauge", []string{"name", "namespace"}, nil},
		{"karpenter_pods_provisioning_scheduling_undecided_time_seconds", "gauge", []string{"name", "namespace"}, nil},
		{"karpenter_pods_scheduling_decision_duration_seconds", "histogram", nil, DurationBuckets()},
		{"karpenter_scheduler_queue_depth", "gauge", []string{"controller", "scheduling_id"}, nil},
		{"karpenter_scheduler_unfinished_work_seconds", "gauge", []string{"controller", "scheduling_id"}, nil},
		{"karpenter_scheduler_pending_pods_by_effective_zone_count", "gauge", []string{"controller", "zone"}, nil},
		{"karpenter_voluntary_disruption_decisions_by_nodepool_total", "counter", []string{"nodepool", "decision", "reason", "consolidation_type"}, nil},
		{"aws_sdk_go_request_total", "counter", []string{"service", "action", "code"}, nil},
		{"aws_sdk_go_request_attempt_total", "counter", []string{"service", "action", "code"}, nil},
		{"aws_sdk_go_request_duration_seconds", "histogram", []string{"service", "action", "code"}, exp(0.01, 1.5, 20)},
		{"aws_sdk_go_request_attempt_duration_seconds", "histogram", []string{"service", "action", "code"}, exp(0.01, 1.5, 20)},
		{"aws_sdk_go_request_retry_count", "histogram", []string{"service", "action", "code"}, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"operator_status_condition_count", "gauge", []string{"namespace", "name", "type", "status", "reason", "group", "kind"}, nil},
		{"operator_status_condition_current_status_seconds", "gauge", []string{"namespace", "name", "type", "status", "reason", "group", "kind"}, nil},
		{"operator_status_condition_transitions_total", "counter", []string{"type", "status", "reason", "group", "kind"}, nil},
		{"operator_status_condition_transition_seconds", "histogram", []string{"type", "status", "group", "kind"}, prometheus.DefBuckets},
		{"operator_termination_current_time_seconds", "gauge", []string{"namespace", "name", "group", "kind"}, nil},
		{"operator_termination_duration_seconds", "histogram", []string{"group", "kind"}, prometheus.DefBuckets},
	}
	byName := map[string]prometheus.Collector{}
	for _, c := range All() {
		byName[firstName(c)] = c
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := byName[tt.name]
			require.Truef(t, ok, "%s is not in All()", tt.name)
			assert.Equal(t, tt.typ, typeOf(c))
			ch := make(chan *prometheus.Desc, 1)
			c.Describe(ch)
			d, err := parseDesc((<-ch).String())
			require.NoError(t, err)
			assert.Equal(t, tt.labels, d.labels)
			if tt.buckets != nil {
				assert.Equal(t, tt.buckets, bucketsOf(t, c, len(tt.labels)))
			}
		})
	}
}

// bucketsOf reads a histogram's bucket bounds, through a series made for
// the purpose (and deleted again) when it is a vector.
func bucketsOf(t *testing.T, c prometheus.Collector, labels int) []float64 {
	t.Helper()
	if v, ok := c.(*prometheus.HistogramVec); ok {
		values := make([]string, labels)
		for i := range values {
			values[i] = "buckets-probe"
		}
		h := v.WithLabelValues(values...).(prometheus.Metric)
		defer v.DeleteLabelValues(values...)
		c = h.(prometheus.Collector)
	}
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		pb := &dto.Metric{}
		require.NoError(t, m.Write(pb))
		var out []float64
		for _, b := range pb.GetHistogram().GetBucket() {
			out = append(out, b.GetUpperBound())
		}
		return out
	}
	t.Fatalf("%s has no series to read buckets from", firstName(c))
	return nil
}
