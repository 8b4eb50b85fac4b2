package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Labels of the per-pod gauges.
const (
	PodNameLabel      = "name"
	PodNamespaceLabel = "namespace"
)

// SchedulingIDLabel names one scheduling simulation.
const SchedulingIDLabel = "scheduling_id"

var podLabels = []string{PodNameLabel, PodNamespaceLabel}

// Pod startup and scheduling metrics, under upstream's names, labels and
// buckets. "Provisioning" series are measured from the first round that
// found the pod a place (its schedulable time) rather than from creation.
var (
	PodsStartupDurationSeconds = prometheus.NewSummary(prometheus.SummaryOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "startup_duration_seconds",
		Help:       "Seconds from a pod's creation to it turning Ready, for pods seen pending.",
		Objectives: SummaryObjectives(),
	})

	PodsBoundDurationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "bound_duration_seconds",
		Help:    "Seconds from a pod's creation to it being bound to a node, for pods seen unbound.",
		Buckets: DurationBuckets(),
	})

	PodsUnboundTimeSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "unbound_time_seconds",
		Help: "Seconds a pending pod has existed without being bound to a node.",
	}, podLabels)

	PodsUnstartedTimeSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "unstarted_time_seconds",
		Help: "Seconds a pod has existed without turning Ready.",
	}, podLabels)

	PodsProvisioningBoundDurationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "provisioning_bound_duration_seconds",
		Help:    "Seconds from the first provisioning round that found a pod a place to the pod being bound.",
		Buckets: DurationBuckets(),
	})

	PodsProvisioningStartupDurationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "provisioning_startup_duration_seconds",
		Help:    "Seconds from the first provisioning round that found a pod a place to the pod turning Ready.",
		Buckets: DurationBuckets(),
	})

	PodsProvisioningUnboundTimeSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "provisioning_unbound_time_seconds",
		Help: "Seconds since the first provisioning round found a place for a pod that is still unbound.",
	}, podLabels)

	PodsProvisioningUnstartedTimeSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "provisioning_unstarted_time_seconds",
		Help: "Seconds since the first provisioning round found a place for a pod that is not Ready yet.",
	}, podLabels)

	PodsProvisioningSchedulingUndecidedTimeSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "provisioning_scheduling_undecided_time_seconds",
		Help: "Seconds since Karpenter first saw a provisionable pod that no provisioning round has decided on yet.",
	}, podLabels)

	PodsSchedulingDecisionDurationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "pods", Name: "scheduling_decision_duration_seconds",
		Help:    "Seconds from Karpenter first seeing a provisionable pod to the first provisioning round deciding on it (a place, or a refusal).",
		Buckets: DurationBuckets(),
	})

	SchedulerQueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "queue_depth",
		Help: "Pods a running scheduling simulation has yet to place, by controller and simulation id.",
	}, []string{ControllerLabel, SchedulingIDLabel})

	SchedulerUnfinishedWorkSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "unfinished_work_seconds",
		Help: "Seconds a running scheduling simulation has been working, by controller and simulation id.",
	}, []string{ControllerLabel, SchedulingIDLabel})

	SchedulerPendingPodsByEffectiveZone = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "pending_pods_by_effective_zone_count",
		Help: "Pending pods of the last simulation by the one zone their zone requirements, volumes and zonal spreads leave them (flexible: several; none: no zone).",
	}, []string{ControllerLabel, ZoneLabel})
)

// PodCollectors lists the metrics of this file.
func PodCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		PodsStartupDurationSeconds, PodsBoundDurationSeconds, PodsUnboundTimeSeconds, PodsUnstartedTimeSeconds,
		PodsProvisioningBoundDurationSeconds, PodsProvisioningStartupDurationSeconds, PodsProvisioningUnboundTimeSeconds,
		PodsProvisioningUnstartedTimeSeconds, PodsProvisioningSchedulingUndecidedTimeSeconds, PodsSchedulingDecisionDurationSeconds,
		SchedulerQueueDepth, SchedulerUnfinishedWorkSeconds, SchedulerPendingPodsByEffectiveZone,
	}
}

// DeletePodSeries drops every per-pod gauge of a pod.
func DeletePodSeries(name, namespace string) {
	for _, g := range []*prometheus.GaugeVec{PodsUnboundTimeSeconds, PodsUnstartedTimeSeconds, PodsProvisioningUnboundTimeSeconds,
		PodsProvisioningUnstartedTimeSeconds, PodsProvisioningSchedulingUndecidedTimeSeconds} {
		g.DeleteLabelValues(name, namespace)
	}
}
