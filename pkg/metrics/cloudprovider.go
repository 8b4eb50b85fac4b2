package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// BatcherLabel names which batched cloud call a batcher metric is about
// (create_fleet).
const BatcherLabel = "batcher"

// ZoneIDLabel is the availability zone id (use1-az1), stable across
// accounts where zone names are not.
const ZoneIDLabel = "zone_id"

// Cloud provider launch metrics, under upstream's names.
var (
	InstanceLaunchFailuresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "instance_launch_failures_total",
		Help: "Launch failures CreateFleet reported, one per error entry, by the zone, zone id and capacity type of the offering that failed and the EC2 error code.",
	}, []string{ZoneLabel, ZoneIDLabel, CapacityTypeLabel, ReasonLabel})

	BatcherBatchTimeSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "batcher_batch_time_seconds",
		Help:    "How long a batching window stayed open before its merged call was made.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{BatcherLabel})

	BatcherBatchSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "batcher_batch_size",
		Help:    "How many requests a batching window merged into one call.",
		Buckets: []float64{1, 2, 4, 5, 10, 25, 50, 100, 250, 500, 1000},
	}, []string{BatcherLabel})
)

// AWS request outcomes (ours), counted per attempt by the SDK middleware
// every AWS client carries.
var (
	AWSRequestsThrottledTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "aws_requests_throttled_total",
		Help: "AWS request attempts refused for the account's request rate (RequestLimitExceeded, Throttling and the like), by service and operation; the SDK's adaptive retryer slows down and retries them.",
	}, []string{"service", "operation"})

	AWSRequestsDeniedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "aws_requests_denied_total",
		Help: "AWS requests the controller's IAM policy did not allow (UnauthorizedOperation, AccessDenied), by service and operation.",
	}, []string{"service", "operation"})

	// LaunchBatchingDisabledTotal counts the NodePools whose batched
	// launches fell back to one CreateFleet per NodeClaim.
	LaunchBatchingDisabledTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "launch_batching_disabled_total",
		Help: "Times batched CreateFleet launches of a NodePool were switched off for a while because AWS denied a call only batching makes, by NodePool and the denied operation.",
	}, []string{NodePoolLabel, "operation"})
)

// CloudProviderCollectors lists the metrics of this file.
func CloudProviderCollectors() []prometheus.Collector {
	return []prometheus.Collector{InstanceLaunchFailuresTotal, BatcherBatchTimeSeconds, BatcherBatchSize,
		AWSRequestsThrottledTotal, AWSRequestsDeniedTotal, LaunchBatchingDisabledTotal}
}
