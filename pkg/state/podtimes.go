package state

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// podTimes remembers, per pending pod, when Karpenter first saw it
// provisionable (ack), when a provisioning round first decided on it (a
// place or a refusal) and when one first found it a place (schedulable):
// what the pod startup and scheduling metrics measure from.
type podTimes struct {
	mu          sync.Mutex
	acks        map[types.NamespacedName]time.Time
	decisions   map[types.NamespacedName]time.Time
	schedulable map[types.NamespacedName]time.Time
}

func (t *podTimes) init() {
	if t.acks == nil {
		t.acks = map[types.NamespacedName]time.Time{}
		t.decisions = map[types.NamespacedName]time.Time{}
		t.schedulable = map[types.NamespacedName]time.Time{}
	}
}

// AckPods records the first time each pod was seen provisionable.
func (c *Cluster) AckPods(pods ...*corev1.Pod) {
	now := c.clock.Now()
	c.times.mu.Lock()
	defer c.times.mu.Unlock()
	c.times.init()
	for _, p := range pods {
		nn := client.ObjectKeyFromObject(p)
		if _, ok := c.times.acks[nn]; !ok {
			c.times.acks[nn] = now
		}
	}
}

// MarkPodSchedulingDecisions records a round's verdict per pod (true: it
// found a place). The first decision on an acknowledged pod is observed in
// karpenter_pods_scheduling_decision_duration_seconds; a place sets the
// pod's schedulable time once, a refusal clears it.
func (c *Cluster) MarkPodSchedulingDecisions(placed map[types.NamespacedName]bool) {
	now := c.clock.Now()
	c.times.mu.Lock()
	defer c.times.mu.Unlock()
	c.times.init()
	for nn, ok := range placed {
		if _, decided := c.times.decisions[nn]; !decided {
			c.times.decisions[nn] = now
			if ack, acked := c.times.acks[nn]; acked {
				metrics.PodsSchedulingDecisionDurationSeconds.Observe(now.Sub(ack).Seconds())
			}
		}
		if !ok {
			delete(c.times.schedulable, nn)
		} else if _, set := c.times.schedulable[nn]; !set {
			c.times.schedulable[nn] = now
		}
	}
}

// PodAckTime is when the pod was first seen provisionable (zero if never).
func (c *Cluster) PodAckTime(nn types.NamespacedName) time.Time { return c.podTime(c.times.acks, nn) }

// PodSchedulingDecisionTime is when a round first decided on the pod.
func (c *Cluster) PodSchedulingDecisionTime(nn types.NamespacedName) time.Time {
	return c.podTime(c.times.decisions, nn)
}

// PodSchedulingSuccessTime is when a round first found the pod a place
// (zero if none has, or the last one refused it).
func (c *Cluster) PodSchedulingSuccessTime(nn types.NamespacedName) time.Time {
	return c.podTime(c.times.schedulable, nn)
}

func (c *Cluster) podTime(m map[types.NamespacedName]time.Time, nn types.NamespacedName) time.Time {
	c.times.mu.Lock()
	defer c.times.mu.Unlock()
	return m[nn]
}

// ClearPodSchedulingTimes forgets a pod's times: it started, finished or
// is gone.
func (c *Cluster) ClearPodSchedulingTimes(nn types.NamespacedName) {
	c.times.mu.Lock()
	defer c.times.mu.Unlock()
	c.times.init()
	delete(c.times.acks, nn)
	delete(c.times.decisions, nn)
	delete(c.times.schedulable, nn)
}
