package disruption

import (
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// EvictionCost is upstream's cost of evicting one pod: 1, plus the pod
// deletion cost scaled so that its range spans about ±16 pods, plus the
// priority scaled the same way, clamped to [-10, 10].
func EvictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if s, ok := p.Annotations[v1.PodDeletionCostAnnotationKey]; ok {
		if c, err := strconv.ParseFloat(s, 64); err == nil {
			cost += c / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Max(-10, math.Min(10, cost))
}

// ReschedulingCost sums EvictionCost over pods.
func ReschedulingCost(pods []*corev1.Pod) float64 {
	total := 0.0
	for _, p := range pods {
		total += EvictionCost(p)
	}
	return total
}

// LifetimeRemaining is the fraction, in [0, 1], of the NodeClaim's
// expireAfter still ahead of it at now (1 without expireAfter): a node
// about to expire anyway is cheap to disrupt.
func LifetimeRemaining(nc *v1.NodeClaim, now time.Time) float64 {
	if nc == nil || nc.Spec.ExpireAfter.Duration == nil || *nc.Spec.ExpireAfter.Duration <= 0 {
		return 1
	}
	total := nc.Spec.ExpireAfter.Duration.Seconds()
	left := total - now.Sub(nc.CreationTimestamp.Time).Seconds()
	return math.Max(0, math.Min(1, left/total))
}

// DisruptionCost is ReschedulingCost of the reschedulable pods scaled by
// LifetimeRemaining.
func DisruptionCost(nc *v1.NodeClaim, reschedulable []*corev1.Pod, now time.Time) float64 {
	return ReschedulingCost(reschedulable) * LifetimeRemaining(nc, now)
}
