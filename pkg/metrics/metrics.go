// Package metrics owns every Prometheus metric the controller exports under
// upstream Karpenter's names and labels, so that existing dashboards and
// alerts keep working. All metrics live on controller-runtime's registry,
// which the manager serves on the metrics port.
package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Namespace prefixes every metric name.
const Namespace = "karpenter"

// Label names shared by several metrics.
const (
	NodePoolLabel         = "nodepool"
	ReasonLabel           = "reason"
	ResourceTypeLabel     = "resource_type"
	CapacityTypeLabel     = "capacity_type"
	ZoneLabel             = "zone"
	MinValuesRelaxedLabel = "min_values_relaxed"
	ControllerLabel       = "controller"
	MethodLabel           = "method"
	ProviderLabel         = "provider"
	ErrorLabel            = "error"
	NodeClaimLabel        = "nodeclaim"
)

// Values of the reason label on created/terminated counters.
const (
	ProvisionedReason = "provisioned"
	ExpiredReason     = "expired"
	UnhealthyReason   = "unhealthy"
)

// DurationBuckets are the histogram buckets for durations: controller-runtime's
// fine-grained ones, extended to 10 minutes for slow singleton loops.
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
		1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}
}

var (
	BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; its labels say which build of the controller is running.",
	}, []string{"version", "goversion", "goarch", "commit"})

	NodeClaimsCreatedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "nodeclaims", Name: "created_total",
		Help: "NodeClaims created, by reason, owning NodePool and whether minValues was relaxed.",
	}, []string{ReasonLabel, NodePoolLabel, MinValuesRelaxedLabel})

	NodeClaimsTerminatedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "nodeclaims", Name: "terminated_total",
		Help: "NodeClaims whose instance was terminated and finalizer removed.",
	}, []string{NodePoolLabel, CapacityTypeLabel, ZoneLabel})

	NodesCreatedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "nodes", Name: "created_total",
		Help: "Nodes that registered for a Karpenter NodeClaim.",
	}, []string{NodePoolLabel, ZoneLabel})

	NodesTerminatedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "nodes", Name: "terminated_total",
		Help: "Karpenter-managed Nodes whose termination finished.",
	}, []string{NodePoolLabel, ZoneLabel})

	// PodState is 1 for every pod, labelled with where it runs; the cluster
	// state is its source, computed at each scrape with its nodes' labels as
	// they are then.
	PodState = NewScrapedGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "state",
		Help: "One series per pod, labelled by name, namespace, owner (API path), node, whether it is scheduled, nodepool, zone, architecture, capacity type, instance type, phase, whether it is Ready and whether its node is managed.",
	}, PodStateLabels)

	SchedulingDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "scheduling_duration_seconds",
		Help:    "How long one scheduling simulation took.",
		Buckets: DurationBuckets(),
	}, []string{ControllerLabel})

	UnschedulablePodsCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "unschedulable_pods_count",
		Help: "Pods the last simulation could not place.",
	}, []string{ControllerLabel})

	IgnoredPodsCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "ignored_pods_count",
		Help: "Pending pods left out of scheduling because they failed validation.",
	})

	CloudProviderDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "duration_seconds",
		Help:    "How long cloud provider calls took, by calling controller, method and provider.",
		Buckets: DurationBuckets(),
	}, []string{ControllerLabel, MethodLabel, ProviderLabel})

	CloudProviderErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "errors_total",
		Help: "Cloud provider calls that failed, by calling controller, method, provider and error type.",
	}, []string{ControllerLabel, MethodLabel, ProviderLabel, ErrorLabel})

	ClusterStateSynced = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cluster_state", Name: "synced",
		Help: "1 when the in-memory cluster state holds every Node and NodeClaim the API server has, else 0.",
	})

	ClusterStateNodeCount = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cluster_state", Name: "node_count",
		Help: "Nodes (and unregistered NodeClaims) in the cluster state.",
	})

	ClusterStateUnsyncedTimeSeconds = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cluster_state", Name: "unsynced_time_seconds",
		Help: "How long the cluster state has been out of sync with the API server.",
	})

	NodePoolUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "usage",
		Help: "Resources provisioned by a NodePool, by resource type.",
	}, []string{NodePoolLabel, ResourceTypeLabel})

	NodePoolLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "limit",
		Help: "A NodePool's spec.limits, by resource type.",
	}, []string{NodePoolLabel, ResourceTypeLabel})

	// NodePoolCostPerHour is ours (upstream has no cost metric): the price
	// of a pool's launched nodes from their offerings.
	NodePoolCostPerHour = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "cost_per_hour",
		Help: "Price per hour of a NodePool's launched nodes, from the offering (instance type, zone, capacity type) each runs on. Nodes whose offering has no known price are left out and counted in karpenter_nodepools_unpriced_nodes.",
	}, []string{NodePoolLabel})

	// NodePoolIdleCostPerHour is ours: the part of NodePoolCostPerHour that
	// pods leave unrequested.
	NodePoolIdleCostPerHour = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "idle_cost_per_hour",
		Help: "Price per hour of the capacity a NodePool's launched nodes leave unrequested: each node's price times one minus its utilization (the larger of the cpu and memory shares of its allocatable that its pods request).",
	}, []string{NodePoolLabel})

	// NodePoolCostTotal is upstream's cost tracker gauge: the $/h of a
	// pool's launched nodes, the same figure as NodePoolCostPerHour.
	NodePoolCostTotal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "cost_total",
		Help: "Price per hour of a NodePool's launched nodes from their offerings (the same figure as karpenter_nodepools_cost_per_hour).",
	}, []string{NodePoolLabel})

	// NodePoolCostTrackerErrorsTotal counts nodes the cost figures could
	// not price, once per NodeClaim.
	NodePoolCostTrackerErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "cost_tracker_errors_total",
		Help: "Launched NodeClaims whose offering had no known price when a NodePool's cost was computed, once per NodeClaim.",
	}, []string{NodePoolLabel, NodeClaimLabel})

	// NodePoolUnpricedNodes is ours: the nodes NodePoolCostPerHour could not
	// price.
	NodePoolUnpricedNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "unpriced_nodes",
		Help: "A NodePool's launched nodes whose offering has no known price.",
	}, []string{NodePoolLabel})
)

// PodStateLabels are the labels of karpenter_pods_state, in order, as
// upstream's: owner is the API path of the pod's first owner, scheduled
// whether it has a node, ready its Ready condition, managed whether its node
// belongs to a NodePool.
var PodStateLabels = []string{"name", "namespace", "owner", "node", "scheduled", NodePoolLabel, ZoneLabel, "arch", CapacityTypeLabel, "instance_type", "phase", "ready", ManagedLabel}

// Collectors lists every metric of this package.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		BuildInfo, NodeClaimsCreatedTotal, NodeClaimsTerminatedTotal, NodesCreatedTotal, NodesTerminatedTotal,
		PodState, SchedulingDurationSeconds, UnschedulablePodsCount, IgnoredPodsCount,
		CloudProviderDurationSeconds, CloudProviderErrorsTotal,
		ClusterStateSynced, ClusterStateNodeCount, ClusterStateUnsyncedTimeSeconds, NodePoolUsage, NodePoolLimit,
		NodePoolCostPerHour, NodePoolIdleCostPerHour, NodePoolUnpricedNodes, NodePoolCostTotal, NodePoolCostTrackerErrorsTotal,
	}
}

// init registers every metric with controller-runtime's registry, which
// the metrics endpoint serves: All() is the one list, so the reference and
// the dashboards' check see exactly what is served.
func init() {
	crmetrics.Registry.MustRegister(All()...)
}

// SetBuildInfo publishes the running build.
func SetBuildInfo(version, commit string) {
	BuildInfo.Reset()
	BuildInfo.WithLabelValues(version, runtime.Version(), runtime.GOARCH, commit).Set(1)
}

// Measure returns a function that, when called (typically deferred),
// observes the time since Measure was called.
func Measure(o prometheus.Observer) func() {
	start := time.Now()
	return func() { o.Observe(time.Since(start).Seconds()) }
}

// All lists every metric the controller registers at init: the karpenter_
// series, the kind-less operator_ status series and the AWS SDK's. It is
// what the generated reference (docs/metrics.md) and the dashboards' check
// read; the node gauges and the per-kind status metrics are built when
// their controllers are (NewNodeGauges, NewStatusMetrics).
func All() []prometheus.Collector {
	out := append([]prometheus.Collector{}, Collectors()...)
	out = append(out, NodeCollectors()...)
	out = append(out, PodCollectors()...)
	out = append(out, SDKCollectors()...)
	out = append(out, GenericStatus.Collectors()...)
	out = append(out, DisruptionCollectors()...)
	out = append(out, ConsolidationCollectors()...)
	out = append(out, InterruptionCollectors()...)
	out = append(out, OfferingCollectors()...)
	out = append(out, CloudProviderCollectors()...)
	return append(out, NodeClaimsUnhealthyDisruptedTotal)
}
