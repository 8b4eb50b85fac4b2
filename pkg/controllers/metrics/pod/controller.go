// Package pod publishes upstream's pod startup series: how long pods wait
// to be bound and to start, from creation and from the first provisioning
// round that found them a place (karpenter_pods_startup_duration_seconds,
// _bound_duration_seconds, _unbound_time_seconds, _unstarted_time_seconds
// and the karpenter_pods_provisioning_* family).
package pod

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// Name is the controller name.
const Name = "metrics.pod"

// refresh is how often the "time so far" gauges of a waiting pod are
// brought up to date.
const refresh = 30 * time.Second

// Times is what the controller reads of the cluster state.
type Times interface {
	PodAckTime(types.NamespacedName) time.Time
	PodSchedulingDecisionTime(types.NamespacedName) time.Time
	PodSchedulingSuccessTime(types.NamespacedName) time.Time
	ClearPodSchedulingTimes(types.NamespacedName)
}

// Controller keeps the pod startup series.
type Controller struct {
	kube  client.Client
	times Times
	clock clock.Clock

	mu sync.Mutex
	// unbound and unstarted are the pods seen pending or not Ready: only
	// their binding and start are observed, so that a restart does not
	// count pods that were running long before.
	unbound   map[types.NamespacedName]bool
	unstarted map[types.NamespacedName]bool
}

// NewController returns the controller.
func NewController(kube client.Client, times Times, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, times: times, clock: clk, unbound: map[types.NamespacedName]bool{}, unstarted: map[types.NamespacedName]bool{}}
}

// Register adds the controller to mgr.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(Name).For(&corev1.Pod{}).Complete(c)
}

// Reconcile updates one pod's series.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nn := req.NamespacedName
	pod := &corev1.Pod{}
	if err := c.kube.Get(ctx, nn, pod); err != nil {
		if client.IgnoreNotFound(err) == nil {
			c.forget(nn)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c.undecided(pod, nn)
	schedulable := c.times.PodSchedulingSuccessTime(nn)
	waiting := c.bound(pod, nn, schedulable)
	if c.started(pod, nn, schedulable) {
		waiting = true
	}
	if !waiting {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: refresh}, nil
}

func (c *Controller) forget(nn types.NamespacedName) {
	c.mu.Lock()
	delete(c.unbound, nn)
	delete(c.unstarted, nn)
	c.mu.Unlock()
	metrics.DeletePodSeries(nn.Name, nn.Namespace)
	c.times.ClearPodSchedulingTimes(nn)
}

// undecided keeps the undecided gauge of a pod Karpenter saw provisionable
// and no round has decided on.
func (c *Controller) undecided(pod *corev1.Pod, nn types.NamespacedName) {
	scheduled := condition(pod, corev1.PodScheduled)
	if !c.times.PodSchedulingDecisionTime(nn).IsZero() || (scheduled != nil && scheduled.Status == corev1.ConditionTrue) {
		metrics.PodsProvisioningSchedulingUndecidedTimeSeconds.DeleteLabelValues(pod.Name, pod.Namespace)
		return
	}
	if ack := c.times.PodAckTime(nn); !ack.IsZero() {
		metrics.PodsProvisioningSchedulingUndecidedTimeSeconds.WithLabelValues(pod.Name, pod.Namespace).Set(c.clock.Since(ack).Seconds())
	}
}

// bound keeps the unbound gauges of a pending, unscheduled pod and observes
// the bound durations when a pod seen so gets its PodScheduled condition.
// It reports whether the pod still waits.
func (c *Controller) bound(pod *corev1.Pod, nn types.NamespacedName, schedulable time.Time) bool {
	scheduled := condition(pod, corev1.PodScheduled)
	if pod.Status.Phase == corev1.PodPending && (scheduled == nil || scheduled.Status != corev1.ConditionTrue) {
		metrics.PodsUnboundTimeSeconds.WithLabelValues(pod.Name, pod.Namespace).Set(c.clock.Since(pod.CreationTimestamp.Time).Seconds())
		setOrDelete(metrics.PodsProvisioningUnboundTimeSeconds, pod, schedulable, c.clock)
		c.mu.Lock()
		c.unbound[nn] = true
		c.mu.Unlock()
		return true
	}
	c.mu.Lock()
	seen := c.unbound[nn]
	delete(c.unbound, nn)
	c.mu.Unlock()
	metrics.PodsUnboundTimeSeconds.DeleteLabelValues(pod.Name, pod.Namespace)
	metrics.PodsProvisioningUnboundTimeSeconds.DeleteLabelValues(pod.Name, pod.Namespace)
	if seen && scheduled != nil && scheduled.Status == corev1.ConditionTrue {
		metrics.PodsBoundDurationSeconds.Observe(scheduled.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
		if !schedulable.IsZero() {
			metrics.PodsProvisioningBoundDurationSeconds.Observe(scheduled.LastTransitionTime.Sub(schedulable).Seconds())
		}
	}
	return false
}

// started keeps the unstarted gauges of a pod that is not Ready yet and
// observes the startup durations when a pod seen so turns Ready. It
// reports whether the pod still waits.
func (c *Controller) started(pod *corev1.Pod, nn types.NamespacedName, schedulable time.Time) bool {
	ready := condition(pod, corev1.PodReady)
	isReady := ready != nil && ready.Status == corev1.ConditionTrue
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	c.mu.Lock()
	seen := c.unstarted[nn]
	c.mu.Unlock()
	if pod.Status.Phase == corev1.PodPending || (seen && !isReady && !terminal) {
		metrics.PodsUnstartedTimeSeconds.WithLabelValues(pod.Name, pod.Namespace).Set(c.clock.Since(pod.CreationTimestamp.Time).Seconds())
		setOrDelete(metrics.PodsProvisioningUnstartedTimeSeconds, pod, schedulable, c.clock)
		c.mu.Lock()
		c.unstarted[nn] = true
		c.mu.Unlock()
		return true
	}
	if !seen {
		return false
	}
	c.mu.Lock()
	delete(c.unstarted, nn)
	c.mu.Unlock()
	metrics.PodsUnstartedTimeSeconds.DeleteLabelValues(pod.Name, pod.Namespace)
	metrics.PodsProvisioningUnstartedTimeSeconds.DeleteLabelValues(pod.Name, pod.Namespace)
	if isReady {
		metrics.PodsStartupDurationSeconds.Observe(ready.LastTransitionTime.Sub(pod.CreationTimestamp.Time).Seconds())
		if !schedulable.IsZero() {
			metrics.PodsProvisioningStartupDurationSeconds.Observe(ready.LastTransitionTime.Sub(schedulable).Seconds())
		}
	}
	c.times.ClearPodSchedulingTimes(nn)
	return false
}

// setOrDelete sets a provisioning gauge to the time since the pod's
// schedulable time, or deletes it while the pod has none.
func setOrDelete(g *prometheus.GaugeVec, pod *corev1.Pod, schedulable time.Time, clk clock.Clock) {
	if schedulable.IsZero() {
		g.DeleteLabelValues(pod.Name, pod.Namespace)
		return
	}
	g.WithLabelValues(pod.Name, pod.Namespace).Set(clk.Since(schedulable).Seconds())
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
