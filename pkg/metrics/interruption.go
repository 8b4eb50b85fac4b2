package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// MessageTypeLabel is the kind of an interruption message (spot_interrupted,
// rebalance_recommendation, scheduled_change, instance_stopped,
// instance_terminated, capacity_reservation_interrupted, no_op), or
// parse_error for a body that is no message at all.
const MessageTypeLabel = "message_type"

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
)

// InterruptionCollectors lists the metrics of this file.
func InterruptionCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		InterruptionReceivedMessagesTotal, InterruptionDeletedMessagesTotal, InterruptionMessageQueueDurationSeconds,
	}
}
