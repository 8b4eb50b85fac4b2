package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Instance-type and offering gauges the AWS provider publishes every minute
// for the instance types its NodePools can launch, under upstream's names.
var (
	InstanceTypeOfferingAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "instance_type_offering_available",
		Help: "Whether an offering (instance type, capacity type, zone) can be launched now: 1 available, 0 not (no capacity cached, or not offered).",
	}, []string{InstanceTypeLabel, CapacityTypeLabel, ZoneLabel})

	InstanceTypeOfferingPriceEstimate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "instance_type_offering_price_estimate",
		Help: "Estimated hourly price of an offering (instance type, capacity type, zone) in USD, as the provider prices launches.",
	}, []string{InstanceTypeLabel, CapacityTypeLabel, ZoneLabel})

	InstanceTypeCPUCores = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "instance_type_cpu_cores",
		Help: "VCPUs of an instance type.",
	}, []string{InstanceTypeLabel})

	InstanceTypeMemoryBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "cloudprovider", Name: "instance_type_memory_bytes",
		Help: "Memory of an instance type in bytes, as the provider reports its capacity.",
	}, []string{InstanceTypeLabel})
)

// OfferingCollectors lists the metrics of this file.
func OfferingCollectors() []prometheus.Collector {
	return []prometheus.Collector{InstanceTypeOfferingAvailable, InstanceTypeOfferingPriceEstimate, InstanceTypeCPUCores, InstanceTypeMemoryBytes}
}
