package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Labels of the disruption metrics.
const (
	DecisionLabel            = "decision"
	ConsolidationTypeLabel   = "consolidation_type"
	ConsolidationPolicyLabel = "consolidation_policy"
	TerminationModeLabel     = "termination_mode"
)

// Disruption metrics, under upstream's names and labels. The reason label
// of the counters is the snake_case reason ("empty", "drifted",
// "underutilized", "expired", ...); of the budget gauges, the NodePool's
// reason as written in budgets ("Empty", "Drifted", "Underutilized").
var (
	NodePoolAllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "allowed_disruptions",
		Help: "Nodes of a NodePool that its budgets allow to be disrupted at once for a reason.",
	}, []string{NodePoolLabel, ReasonLabel})

	NodePoolNodesConsumingBudgets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "nodepools", Name: "nodes_consuming_budgets",
		Help: "Nodes of a NodePool that already use its disruption budget (NotReady, deleting or being disrupted).",
	}, []string{NodePoolLabel, ReasonLabel})

	DisruptionDecisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "decisions_total",
		Help: "Disruption commands started, by decision (delete, replace), reason and consolidation type.",
	}, []string{DecisionLabel, ReasonLabel, ConsolidationTypeLabel})

	DisruptionDecisionsByNodePoolTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "decisions_by_nodepool_total",
		Help: "Disruption commands started, by the candidates' NodePool, decision (delete, replace), reason and consolidation type.",
	}, []string{NodePoolLabel, DecisionLabel, ReasonLabel, ConsolidationTypeLabel})

	DisruptionEligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "eligible_nodes",
		Help: "Candidates a disruption method considered in its last evaluation, by reason.",
	}, []string{ReasonLabel})

	DisruptionEvaluationDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "decision_evaluation_duration_seconds",
		Help:    "How long a disruption method took to decide, by reason and consolidation type.",
		Buckets: DurationBuckets(),
	}, []string{ReasonLabel, ConsolidationTypeLabel})

	DisruptionQueueFailuresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "queue_failures_total",
		Help: "Disruption commands that failed and were rolled back, by decision, reason and consolidation type.",
	}, []string{DecisionLabel, ReasonLabel, ConsolidationTypeLabel})

	NodeClaimsDisruptedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "nodeclaims", Name: "disrupted_total",
		Help: "NodeClaims deleted by a disruption, by reason, NodePool, capacity type, consolidation policy and termination mode.",
	}, []string{ReasonLabel, NodePoolLabel, CapacityTypeLabel, ConsolidationPolicyLabel, TerminationModeLabel})

	PodsDisruptionInitiatedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "disruption_initiated_total",
		Help: "Pods whose node a disruption started to remove, by reason, NodePool, capacity type, consolidation policy and termination mode.",
	}, []string{ReasonLabel, NodePoolLabel, CapacityTypeLabel, ConsolidationPolicyLabel, TerminationModeLabel})
)

// Values of DisruptionSavingsPerHourTotal's estimate label.
const (
	EstimatePredicted = "predicted"
	EstimateRealized  = "realized"
)

// DisruptionSavingsPerHourTotal is ours: the $/h each completed disruption
// command saves, as planned (the candidates' price minus the planned
// replacements') and as realized (minus the replacements that launched).
var DisruptionSavingsPerHourTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "savings_per_hour_total",
	Help: "Sum of the $/h that completed disruption commands save: predicted (candidates' price minus the planned replacements') and realized (minus the replacements that launched), by reason and the candidates' NodePool. A command that made the fleet dearer (a drift onto a pricier type, a replacement that launched dearer than its candidates) adds 0; its log line keeps the signed values.",
}, []string{ReasonLabel, NodePoolLabel, "estimate"})

// DisruptionCollectors lists the metrics of this file.
func DisruptionCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		NodePoolAllowedDisruptions, NodePoolNodesConsumingBudgets, DisruptionDecisionsTotal, DisruptionDecisionsByNodePoolTotal, DisruptionEligibleNodes,
		DisruptionEvaluationDurationSeconds, DisruptionQueueFailuresTotal, NodeClaimsDisruptedTotal, PodsDisruptionInitiatedTotal,
		DisruptionSavingsPerHourTotal,
	}
}
