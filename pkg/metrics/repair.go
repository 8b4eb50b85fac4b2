package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Labels of karpenter_nodeclaims_unhealthy_disrupted_total.
const (
	ConditionLabel = "condition"
	ImageIDLabel   = "image_id"
)

// NodeClaimsUnhealthyDisruptedTotal counts NodeClaims node repair replaced,
// by the node condition (snake_case, e.g. "ready") that made them unhealthy.
var NodeClaimsUnhealthyDisruptedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: Namespace, Subsystem: "nodeclaims", Name: "unhealthy_disrupted_total",
	Help: "NodeClaims deleted by node repair, by unhealthy condition, owning NodePool, capacity type and image ID.",
}, []string{ConditionLabel, NodePoolLabel, CapacityTypeLabel, ImageIDLabel})
