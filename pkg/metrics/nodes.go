package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Labels of the per-node gauges that are not node labels.
const (
	NodeNameLabel  = "node_name"
	NodePhaseLabel = "phase"
	ManagedLabel   = "managed"
	CodeLabel      = "code"
)

// LabelName turns a Kubernetes label key or resource name into the metric
// label name upstream uses for it: the part after the last "/", lower-cased,
// with dashes as underscores (node.kubernetes.io/instance-type →
// instance_type, ephemeral-storage → ephemeral_storage).
func LabelName(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		key = key[i+1:]
	}
	return strings.ReplaceAll(strings.ToLower(key), "-", "_")
}

// NodeGauges are the per-node gauges of upstream's node metrics controller.
// Their label names depend on the well-known node labels of the running
// provider (each one becomes a label, see LabelName), so they are built
// when the controller is, not at init.
type NodeGauges struct {
	// LabelKeys are the node label keys the gauges carry, in label order;
	// LabelNames are their metric label names (deduplicated).
	LabelKeys  []string
	LabelNames []string

	Allocatable, TotalPodRequests, TotalPodLimits, TotalDaemonRequests, TotalDaemonLimits, SystemOverhead *prometheus.GaugeVec
	Lifetime                                                                                              *prometheus.GaugeVec
}

// NewNodeGauges builds the node gauges for the given well-known node label
// keys. Keys that map to the same label name keep the first.
func NewNodeGauges(wellKnown []string) *NodeGauges {
	g := &NodeGauges{}
	seen := map[string]bool{NodeNameLabel: true, NodePhaseLabel: true, ManagedLabel: true, ResourceTypeLabel: true}
	for _, k := range wellKnown {
		name := LabelName(k)
		if seen[name] || !strings.Contains(k, "/") {
			continue
		}
		seen[name] = true
		g.LabelKeys = append(g.LabelKeys, k)
		g.LabelNames = append(g.LabelNames, name)
	}
	base := append(append([]string{}, g.LabelNames...), NodeNameLabel, NodePhaseLabel, ManagedLabel)
	withResource := append(append([]string{}, base...), ResourceTypeLabel)
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "nodes", Name: name, Help: help}, labels)
	}
	const suffix = " Labelled by node name, phase, whether Karpenter manages it, resource type and one label per well-known node label."
	g.Allocatable = gauge("allocatable", "Resources a node offers pods (its status.allocatable), cpu in cores."+suffix, withResource)
	g.TotalPodRequests = gauge("total_pod_requests", "Requests of the pods bound to a node, DaemonSet pods included, cpu in cores."+suffix, withResource)
	g.TotalPodLimits = gauge("total_pod_limits", "Limits of the pods bound to a node, DaemonSet pods included, cpu in cores."+suffix, withResource)
	g.TotalDaemonRequests = gauge("total_daemon_requests", "Requests of the DaemonSet pods bound to a node, cpu in cores."+suffix, withResource)
	g.TotalDaemonLimits = gauge("total_daemon_limits", "Limits of the DaemonSet pods bound to a node, cpu in cores."+suffix, withResource)
	g.SystemOverhead = gauge("system_overhead", "Capacity a node keeps from pods: status.capacity minus status.allocatable, cpu in cores."+suffix, withResource)
	g.Lifetime = gauge("current_lifetime_seconds", "Seconds since a node was created. Labelled by node name, phase, whether Karpenter manages it and one label per well-known node label.", base)
	return g
}

// Vecs lists the gauges.
func (g *NodeGauges) Vecs() []*prometheus.GaugeVec {
	return []*prometheus.GaugeVec{g.Allocatable, g.TotalPodRequests, g.TotalPodLimits, g.TotalDaemonRequests, g.TotalDaemonLimits, g.SystemOverhead, g.Lifetime}
}

// Collectors lists the gauges as collectors (for their descriptions).
func (g *NodeGauges) Collectors() []prometheus.Collector {
	var out []prometheus.Collector
	for _, v := range g.Vecs() {
		out = append(out, v)
	}
	return out
}

// nodeLifetimeBuckets span 15 minutes to 30 days, as upstream's.
func nodeLifetimeBuckets() []float64 {
	day := 24 * time.Hour
	var out []float64
	for _, d := range []time.Duration{
		15 * time.Minute, 30 * time.Minute, 45 * time.Minute,
		time.Hour, 2 * time.Hour, 4 * time.Hour, 6 * time.Hour, 8 * time.Hour, 10 * time.Hour, 12 * time.Hour, 16 * time.Hour, 20 * time.Hour,
		day, 2 * day, 3 * day, 5 * day, 10 * day, 15 * day, 20 * day, 25 * day, 30 * day,
	} {
		out = append(out, d.Seconds())
	}
	return out
}

// SummaryObjectives are the quantiles upstream's summaries report, each
// within 1%.
func SummaryObjectives() map[float64]float64 {
	return map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}
}

// Node and NodeClaim termination, drain and utilization metrics, under
// upstream's names, labels and buckets.
var (
	ClusterUtilizationPercent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cluster", Name: "utilization_percent",
		Help: "Pod requests as a percentage of the allocatable resources of all nodes, by resource type.",
	}, []string{ResourceTypeLabel})

	NodesTerminationDurationSeconds = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Namespace: Namespace, Subsystem: "nodes", Name: "termination_duration_seconds",
		Help:       "Seconds from a node's deletion to the removal of its termination finalizer, by NodePool.",
		Objectives: SummaryObjectives(),
	}, []string{NodePoolLabel})

	NodesDrainedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "nodes", Name: "drained_total",
		Help: "Nodes whose drain finished (their NodeClaim turned Drained), by NodePool.",
	}, []string{NodePoolLabel})

	NodesLifetimeDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "nodes", Name: "lifetime_duration_seconds",
		Help:    "Seconds from a node's creation to the end of its termination, by NodePool.",
		Buckets: nodeLifetimeBuckets(),
	}, []string{NodePoolLabel})

	NodeClaimsInstanceTerminationDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "nodeclaims", Name: "instance_termination_duration_seconds",
		Help:    "Seconds from a NodeClaim turning InstanceTerminating to its provider reporting the instance gone, by NodePool.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	}, []string{NodePoolLabel})

	NodeClaimsTerminationDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "nodeclaims", Name: "termination_duration_seconds",
		Help:    "Seconds from a NodeClaim's deletion to the removal of its termination finalizer, by NodePool.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{NodePoolLabel})

	PodsEvictionRequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "eviction_requests_total",
		Help: "Eviction requests Karpenter sent while draining nodes, by the HTTP status code of the answer.",
	}, []string{CodeLabel})

	PodsDrainedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "drained_total",
		Help: "Pods evicted while draining nodes, by reason: the disruption reason on the node's NodeClaim, or Forceful Termination.",
	}, []string{ReasonLabel})

	InstanceTerminationFailuresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "instance_termination_failures_total",
		Help: "TerminateInstances calls that failed, by the zone and zone id of the instance.",
	}, []string{ZoneLabel, ZoneIDLabel})
)

// ForcefulTerminationReason is the drained-pod reason when the node's
// NodeClaim carries no disruption reason.
const ForcefulTerminationReason = "Forceful Termination"

// NodeCollectors lists the metrics of this file (the per-node gauges are
// built by NewNodeGauges).
func NodeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		ClusterUtilizationPercent, NodesTerminationDurationSeconds, NodesDrainedTotal, NodesLifetimeDurationSeconds,
		NodeClaimsInstanceTerminationDurationSeconds, NodeClaimsTerminationDurationSeconds,
		PodsEvictionRequestsTotal, PodsDrainedTotal, InstanceTerminationFailuresTotal,
	}
}
