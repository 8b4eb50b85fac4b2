package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// MessageTypeLabel is the kind of an interruption message (spot_interrupted,
// rebalance_recommendation, scheduled_change, instance_stopped,
// instance_terminated, capacity_reservation_interrupted, no_op), or
// parse_error for a body that is no message at all.
const MessageTypeLabel = "message_type"

// Labels of the interruption controller's own metrics.
const (
	// CategoryLabel is what the instance-status check found:
	// instance_status, system_status or scheduled_event.
	CategoryLabel = "category"
	// ActionLabel is what the interruption controller did for one instance
	// a message names: cordon_and_drain, notify, replace, unmanaged or
	// already_deleting.
	ActionLabel       = "action"
	InstanceTypeLabel = "instance_type"
)

// Interruption queue metrics, under upstream's names.
var (
	InterruptionReceivedMessagesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "interruption", Name: "received_messages_total",
		Help: "Messages received from the interruption queue, by message type.",
	}, []string{MessageTypeLabel})

	InterruptionDeletedMessagesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "interruption", Name: "deleted_messages_total",
		Help: "Messages deleted from the interruption queue after handling, by message type.",
	}, []string{MessageTypeLabel})

	InterruptionMessageQueueDurationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "interruption", Name: "message_queue_duration_seconds",
		Help:    "Time from a message being sent to the interruption queue (SentTimestamp) to its handling finishing.",
		Buckets: DurationBuckets(),
	})

	InterruptionInstanceStatusUnhealthyTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "interruption", Name: "instance_status_unhealthy_total",
		Help: "Karpenter instances DescribeInstanceStatus reported unhealthy and whose NodeClaim was deleted, by category: instance_status or system_status (impaired for 120 s) and scheduled_event; both drained normally, at most 20% of a pool at once.",
	}, []string{CategoryLabel})

	// InterruptionActionsPerformedTotal is ours (upstream's v0 had a
	// similar actions_performed counter): what each instance named by a
	// message came to, including the messages for instances Karpenter does
	// not manage.
	InterruptionActionsPerformedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "interruption", Name: "actions_performed_total",
		Help: "Instances named by interruption messages, by message type and what was done: cordon_and_drain (NodeClaim deleted), notify (event only), replace (marked for replacement on a rebalance recommendation), unmanaged (no NodeClaim has the instance) or already_deleting.",
	}, []string{MessageTypeLabel, ActionLabel})

	// InterruptionOfferingInterruptionsPerHour is ours: the learned spot
	// interruption rate of an offering, when interruption-rate learning is
	// on. A series disappears once its rate has decayed to nothing.
	InterruptionOfferingInterruptionsPerHour = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "interruption", Name: "offering_interruptions_per_hour",
		Help: "Learned interruption rate of an offering (instance type, zone, capacity type): an exponentially decaying count of its interruptions, per hour. Only with interruption-rate learning on.",
	}, []string{InstanceTypeLabel, ZoneLabel, CapacityTypeLabel})
)

// InterruptionCollectors lists the metrics of this file.
func InterruptionCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		InterruptionReceivedMessagesTotal, InterruptionDeletedMessagesTotal, InterruptionMessageQueueDurationSeconds,
		InterruptionInstanceStatusUnhealthyTotal, InterruptionActionsPerformedTotal, InterruptionOfferingInterruptionsPerHour,
	}
}
