package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// PolicyLabel is the consolidation policy of the scored move's NodePool.
const PolicyLabel = "policy"

// Consolidation metrics, under upstream's names and labels. The decision
// label of the Balanced metrics is "approved" or "rejected".
var (
	ConsolidationTimeoutsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "consolidation_timeouts_total",
		Help: "Consolidation evaluations that gave up on their timeout, by consolidation type.",
	}, []string{ConsolidationTypeLabel})

	FailedValidationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "voluntary_disruption", Name: "failed_validations_total",
		Help: "Consolidation commands abandoned because they no longer held after the validation delay, by consolidation type.",
	}, []string{ConsolidationTypeLabel})

	ConsolidationScore = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "consolidation", Name: "score",
		Help:    "Scores of consolidation moves of Balanced NodePools, by decision, NodePool and policy.",
		Buckets: []float64{0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0},
	}, []string{DecisionLabel, NodePoolLabel, PolicyLabel})

	ConsolidationMovesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "consolidation", Name: "moves_total",
		Help: "Consolidation moves of Balanced NodePools scored, by decision, NodePool and policy.",
	}, []string{DecisionLabel, NodePoolLabel, PolicyLabel})
)

// ConsolidationCollectors lists the metrics of this file.
func ConsolidationCollectors() []prometheus.Collector {
	return []prometheus.Collector{ConsolidationTimeoutsTotal, FailedValidationsTotal, ConsolidationScore, ConsolidationMovesTotal}
}
