package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ServiceLabel is the AWS service of an SDK request metric; its action
// label (ActionLabel) is the operation.
const ServiceLabel = "service"

var sdkLabels = []string{ServiceLabel, ActionLabel, CodeLabel}

// AWS SDK request metrics under the names upstream's SDK middleware
// registers: one series per service, operation and HTTP status code.
var (
	SDKRequestTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aws_sdk_go_request_total",
		Help: "AWS API calls made through the SDK, retries included as one call, by service, operation and the final HTTP status code.",
	}, sdkLabels)

	SDKRequestAttemptTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aws_sdk_go_request_attempt_total",
		Help: "HTTP attempts the SDK made for AWS API calls (a retried call counts each try), by service, operation and the attempt's HTTP status code.",
	}, sdkLabels)

	SDKRequestDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aws_sdk_go_request_duration_seconds",
		Help:    "Seconds an AWS API call took through the SDK, retries and back-off included.",
		Buckets: prometheus.ExponentialBuckets(0.01, 1.5, 20),
	}, sdkLabels)

	SDKRequestAttemptDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aws_sdk_go_request_attempt_duration_seconds",
		Help:    "Seconds one HTTP attempt of an AWS API call took.",
		Buckets: prometheus.ExponentialBuckets(0.01, 1.5, 20),
	}, sdkLabels)

	SDKRequestRetryCount = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aws_sdk_go_request_retry_count",
		Help:    "Retries an AWS API call needed.",
		Buckets: []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
	}, sdkLabels)
)

// SDKCollectors lists the metrics of this file.
func SDKCollectors() []prometheus.Collector {
	return []prometheus.Collector{SDKRequestTotal, SDKRequestAttemptTotal, SDKRequestDurationSeconds, SDKRequestAttemptDurationSeconds, SDKRequestRetryCount}
}
