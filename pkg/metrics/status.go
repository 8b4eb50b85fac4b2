package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// OperatorNamespace prefixes the status-condition and termination metrics,
// as upstream's operator package does.
const OperatorNamespace = "operator"

// Labels of the status-condition metrics.
const (
	StatusLabel = "status"
	TypeLabel   = "type"
	NameLabel   = "name"
	GroupLabel  = "group"
	KindLabel   = "kind"
)

// StatusBuckets are the transition and termination duration buckets of the
// core kinds (NodeClaim, NodePool, Node, CapacityBuffer): 0.5s doubling to
// 8192s.
func StatusBuckets() []float64 { return prometheus.ExponentialBuckets(0.5, 2, 15) }

// StatusMetrics are the status-condition and termination metrics of one
// kind, or (Kind "") the kind-less series labelled by group and kind that
// upstream still emits beside them.
type StatusMetrics struct {
	// ExtraLabels are the metric label names of the object labels the
	// kind's series carry (see PromLabel).
	ExtraLabels []string

	// The gauges are computed at each scrape from what the status
	// controllers remember of their objects (AddSource).
	ConditionCount                *ScrapedGaugeVec
	ConditionCurrentStatusSeconds *ScrapedGaugeVec
	ConditionTransitionsTotal     *prometheus.CounterVec
	ConditionTransitionSeconds    *prometheus.HistogramVec
	TerminationCurrentTimeSeconds *ScrapedGaugeVec
	TerminationDurationSeconds    *prometheus.HistogramVec
}

// PromLabel turns an object label key into a metric label name as
// upstream's operator package does: "/", "." and "-" become "_"
// (karpenter.sh/nodepool → karpenter_sh_nodepool).
func PromLabel(key string) string {
	return strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(key)
}

// NewStatusMetrics builds the metrics of one kind (lower-case, e.g.
// "nodeclaim") with one extra label per object label key. Buckets nil
// means Prometheus' default buckets.
func NewStatusMetrics(kind string, labelKeys []string, buckets []float64) *StatusMetrics {
	conditionSubsystem, terminationSubsystem := "status_condition", "termination"
	if kind != "" {
		conditionSubsystem, terminationSubsystem = kind+"_"+conditionSubsystem, kind+"_"+terminationSubsystem
	}
	if buckets == nil {
		buckets = prometheus.DefBuckets
	}
	m := &StatusMetrics{}
	for _, k := range labelKeys {
		m.ExtraLabels = append(m.ExtraLabels, PromLabel(k))
	}
	extra := m.ExtraLabels
	what := "an object"
	if kind != "" {
		what = "a " + kind
	}
	m.ConditionCount = NewScrapedGaugeVec(prometheus.GaugeOpts{
		Namespace: OperatorNamespace, Subsystem: conditionSubsystem, Name: "count",
		Help: "1 for each status condition of " + what + ", by its type, status and reason.",
	}, append([]string{PodNamespaceLabel, NameLabel, TypeLabel, StatusLabel, ReasonLabel}, extra...))
	m.ConditionCurrentStatusSeconds = NewScrapedGaugeVec(prometheus.GaugeOpts{
		Namespace: OperatorNamespace, Subsystem: conditionSubsystem, Name: "current_status_seconds",
		Help: "Seconds each status condition of " + what + " has held its current status.",
	}, append([]string{PodNamespaceLabel, NameLabel, TypeLabel, StatusLabel, ReasonLabel}, extra...))
	m.ConditionTransitionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: OperatorNamespace, Subsystem: conditionSubsystem, Name: "transitions_total",
		Help: "Status condition transitions seen on " + what + ", by type and the new status and reason.",
	}, append([]string{TypeLabel, StatusLabel, ReasonLabel}, extra...))
	m.ConditionTransitionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: OperatorNamespace, Subsystem: conditionSubsystem, Name: "transition_seconds",
		Help:    "Seconds a status condition of " + what + " held a status before it changed, by type and the status it left.",
		Buckets: buckets,
	}, append([]string{TypeLabel, StatusLabel}, extra...))
	m.TerminationCurrentTimeSeconds = NewScrapedGaugeVec(prometheus.GaugeOpts{
		Namespace: OperatorNamespace, Subsystem: terminationSubsystem, Name: "current_time_seconds",
		Help: "Seconds since " + what + " started terminating, while it still exists.",
	}, append([]string{PodNamespaceLabel, NameLabel}, extra...))
	m.TerminationDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: OperatorNamespace, Subsystem: terminationSubsystem, Name: "duration_seconds",
		Help:    "Seconds " + what + " took from its deletion to being gone.",
		Buckets: buckets,
	}, extra)
	return m
}

// Collectors lists the metrics.
func (m *StatusMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ConditionCount, m.ConditionCurrentStatusSeconds, m.ConditionTransitionsTotal,
		m.ConditionTransitionSeconds, m.TerminationCurrentTimeSeconds, m.TerminationDurationSeconds}
}

// GenericStatus are the kind-less operator_status_condition_* and
// operator_termination_* series, labelled by group and kind, which
// upstream emits for NodeClaims, NodePools, CapacityBuffers and its
// NodeClass beside the per-kind ones.
var GenericStatus = NewStatusMetrics("", []string{GroupLabel, KindLabel}, nil)

// Object label keys the per-kind status series carry, as upstream's.
const (
	nodePoolLabelKey    = "karpenter.sh/nodepool"
	initializedLabelKey = "karpenter.sh/initialized"
)

// NodeClaimStatusMetrics are the NodeClaim series, labelled by the
// provider's NodeClass label keys (karpenter.k8s.aws/ec2nodeclass) and the
// NodePool.
func NodeClaimStatusMetrics(nodeClassLabelKeys []string) *StatusMetrics {
	return NewStatusMetrics("nodeclaim", append(append([]string{}, nodeClassLabelKeys...), nodePoolLabelKey), StatusBuckets())
}

// NodeStatusMetrics are the Node series, labelled like the NodeClaim's and
// by whether the node is initialized.
func NodeStatusMetrics(nodeClassLabelKeys []string) *StatusMetrics {
	return NewStatusMetrics("node", append(append([]string{}, nodeClassLabelKeys...), nodePoolLabelKey, initializedLabelKey), StatusBuckets())
}

// NodePoolStatusMetrics are the NodePool series.
func NodePoolStatusMetrics() *StatusMetrics {
	return NewStatusMetrics("nodepool", nil, StatusBuckets())
}

// CapacityBufferStatusMetrics are the CapacityBuffer series.
func CapacityBufferStatusMetrics() *StatusMetrics {
	return NewStatusMetrics("capacitybuffer", nil, StatusBuckets())
}

// NodeClassStatusMetrics are a provider NodeClass's series (kind
// lower-cased, e.g. ec2nodeclass), with Prometheus' default buckets as
// upstream's AWS provider registers them.
func NodeClassStatusMetrics(kind string) *StatusMetrics { return NewStatusMetrics(kind, nil, nil) }
