// Package node publishes upstream's per-node resource gauges
// (karpenter_nodes_allocatable, _total_pod_requests, _total_pod_limits,
// _total_daemon_requests, _total_daemon_limits, _system_overhead,
// _current_lifetime_seconds) and karpenter_cluster_utilization_percent from
// the cluster state, every 5 seconds.
package node

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/karpenter-go/karpenter/pkg/controllers/internal/recovery"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// Name is the controller name.
const Name = "metrics.node"

// Interval is how often the gauges are refreshed.
const Interval = 5 * time.Second

// Cluster is what the controller reads of the cluster state.
type Cluster interface {
	Nodes() []*state.StateNode
}

// Controller keeps the gauges.
type Controller struct {
	cluster Cluster
	clock   clock.Clock
	gauges  *metrics.NodeGauges
	// last holds, per gauge, the label values set in the previous pass
	// (joined), so that series of nodes that are gone are deleted without
	// a gap for the others.
	last map[*prometheus.GaugeVec]map[string][]string
}

// NewController builds the gauges for the given well-known node label keys
// (the core's and the provider's) and registers them.
func NewController(cluster Cluster, clk clock.Clock, wellKnown []string) (*Controller, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	g := metrics.NewNodeGauges(wellKnown)
	if err := metrics.Register(g.Collectors()...); err != nil {
		return nil, err
	}
	return &Controller{cluster: cluster, clock: clk, gauges: g, last: map[*prometheus.GaugeVec]map[string][]string{}}, nil
}

// Gauges are the gauges the controller publishes.
func (c *Controller) Gauges() *metrics.NodeGauges { return c.gauges }

// Register runs the refresh loop under the manager (leader only).
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(c.Start))
}

// Start refreshes the gauges every Interval until ctx ends; a pass that
// panics is logged with its stack and the next one comes as usual.
func (c *Controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", Name))
	for {
		_ = recovery.Do(ctx, Name, c.Reconcile)
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(Interval):
		}
	}
}

// Reconcile sets every gauge from the current state and deletes the series
// of nodes no longer there.
func (c *Controller) Reconcile() {
	g := c.gauges
	current := map[*prometheus.GaugeVec]map[string][]string{}
	set := func(vec *prometheus.GaugeVec, values []string, v float64) {
		vec.WithLabelValues(values...).Set(v)
		if current[vec] == nil {
			current[vec] = map[string][]string{}
		}
		current[vec][strings.Join(values, "\x00")] = values
	}
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	for _, n := range c.cluster.Nodes() {
		if n.Node == nil {
			continue
		}
		base := c.labelValues(n)
		daemonRequests, daemonLimits := n.DaemonSetRequests(), n.DaemonSetLimits()
		totalRequests, totalLimits := sum(n.PodRequests(), daemonRequests), sum(n.PodLimits(), daemonLimits)
		for vec, list := range map[*prometheus.GaugeVec]corev1.ResourceList{
			g.Allocatable:         n.Node.Status.Allocatable,
			g.TotalPodRequests:    totalRequests,
			g.TotalPodLimits:      totalLimits,
			g.TotalDaemonRequests: daemonRequests,
			g.TotalDaemonLimits:   daemonLimits,
			g.SystemOverhead:      subtract(n.Node.Status.Capacity, n.Node.Status.Allocatable),
		} {
			for name, q := range list {
				set(vec, append(append([]string{}, base...), metrics.LabelName(string(name))), value(name, q))
			}
		}
		set(g.Lifetime, base, c.clock.Since(n.Node.CreationTimestamp.Time).Seconds())
		addInto(allocatable, n.Allocatable())
		addInto(requested, totalRequests)
	}
	for vec, series := range c.last {
		for key, values := range series {
			if _, ok := current[vec][key]; !ok {
				vec.DeleteLabelValues(values...)
			}
		}
	}
	c.last = current
	setUtilization(allocatable, requested)
}

// labelValues are a node's values for the gauges' labels: the well-known
// node labels, then node name, phase and whether Karpenter manages it.
func (c *Controller) labelValues(n *state.StateNode) []string {
	out := make([]string, 0, len(c.gauges.LabelKeys)+3)
	for _, k := range c.gauges.LabelKeys {
		out = append(out, n.Node.Labels[k])
	}
	return append(out, n.Node.Name, string(n.Node.Status.Phase), strconv.FormatBool(n.Managed()))
}

// setUtilization publishes requests as a percentage of allocatable per
// resource, over all nodes; resources nobody offers are left out.
func setUtilization(allocatable, requested corev1.ResourceList) {
	metrics.ClusterUtilizationPercent.Reset()
	for name, a := range allocatable {
		if a.IsZero() {
			continue
		}
		r := requested[name]
		pct := 100 * r.AsApproximateFloat64() / a.AsApproximateFloat64()
		metrics.ClusterUtilizationPercent.WithLabelValues(metrics.LabelName(string(name))).Set(pct)
	}
}

// value is a quantity as the gauges report it: cpu in cores, everything
// else in its base unit.
func value(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}

func sum(a, b corev1.ResourceList) corev1.ResourceList {
	out := a.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	addInto(out, b)
	return out
}

func addInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		s := dst[name]
		s.Add(q)
		dst[name] = s
	}
}

// subtract is a - b per resource of a.
func subtract(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range a {
		d := q.DeepCopy()
		if sub, ok := b[name]; ok {
			d.Sub(sub)
		}
		out[name] = d
	}
	return out
}
