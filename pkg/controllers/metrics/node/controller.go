// Package node publishes upstream's per-node resource gauges
// (karpenter_nodes_allocatable, _total_pod_requests, _total_pod_limits,
// _total_daemon_requests, _total_daemon_limits, _system_overhead,
// _current_lifetime_seconds), computed from the cluster state at each
// scrape, and karpenter_cluster_utilization_percent, every 5 seconds.
package node

import (
	"context"
	"strconv"
	"sync/atomic"
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

// Controller publishes the gauges. It keeps no series: a scrape computes
// them from the cluster state (a Collector), so the label pairs of every
// node's two dozen series are garbage after the scrape instead of held
// for the process's life, and nothing is computed between scrapes.
type Controller struct {
	cluster Cluster
	clock   clock.Clock
	gauges  *metrics.NodeGauges
	descs   map[*prometheus.GaugeVec]*prometheus.Desc
	// leading is set while Start runs: only the leader publishes, as
	// upstream's node metrics controller runs on the leader alone.
	leading atomic.Bool
}

var _ prometheus.Collector = (*Controller)(nil)

// NewController builds the gauges for the given well-known node label keys
// (the core's and the provider's) and registers the controller as their
// collector.
func NewController(cluster Cluster, clk clock.Clock, wellKnown []string) (*Controller, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Controller{cluster: cluster, clock: clk, gauges: metrics.NewNodeGauges(wellKnown), descs: map[*prometheus.GaugeVec]*prometheus.Desc{}}
	for _, vec := range c.gauges.Vecs() {
		ch := make(chan *prometheus.Desc, 1)
		vec.Describe(ch)
		c.descs[vec] = <-ch
	}
	if err := metrics.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Gauges are the gauges the controller publishes (their names, help and
// labels; the controller sets no value on them).
func (c *Controller) Gauges() *metrics.NodeGauges { return c.gauges }

// Register runs the controller under the manager (leader only).
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(c.Start))
}

// Start publishes the node gauges and refreshes the cluster utilization
// every Interval until ctx ends; a pass that panics is logged with its
// stack and the next one comes as usual.
func (c *Controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", Name))
	c.leading.Store(true)
	defer c.leading.Store(false)
	for {
		_ = recovery.Do(ctx, Name, c.Reconcile)
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(Interval):
		}
	}
}

// Reconcile sets the cluster utilization from the current state.
func (c *Controller) Reconcile() {
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	for _, n := range c.cluster.Nodes() {
		if n.Node == nil {
			continue
		}
		addInto(allocatable, n.Allocatable())
		addInto(requested, sum(n.PodRequests(), n.DaemonSetRequests()))
	}
	setUtilization(allocatable, requested)
}

// Describe implements prometheus.Collector.
func (c *Controller) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: every node's series, from the
// cluster state as it is now.
func (c *Controller) Collect(ch chan<- prometheus.Metric) {
	if !c.leading.Load() {
		return
	}
	emit := func(vec *prometheus.GaugeVec, values []string, v float64) {
		// Label values are node labels and names the API server
		// validated; a metric that still fails is left out, not a
		// panic in the scrape.
		if m, err := prometheus.NewConstMetric(c.descs[vec], prometheus.GaugeValue, v, values...); err == nil {
			ch <- m
		}
	}
	g := c.gauges
	for _, n := range c.cluster.Nodes() {
		if n.Node == nil {
			continue
		}
		base := c.labelValues(n)
		daemonRequests, daemonLimits := n.DaemonSetRequests(), n.DaemonSetLimits()
		for vec, list := range map[*prometheus.GaugeVec]corev1.ResourceList{
			g.Allocatable:         n.Node.Status.Allocatable,
			g.TotalPodRequests:    sum(n.PodRequests(), daemonRequests),
			g.TotalPodLimits:      sum(n.PodLimits(), daemonLimits),
			g.TotalDaemonRequests: daemonRequests,
			g.TotalDaemonLimits:   daemonLimits,
			g.SystemOverhead:      subtract(n.Node.Status.Capacity, n.Node.Status.Allocatable),
		} {
			for name, q := range list {
				emit(vec, append(append([]string{}, base...), metrics.LabelName(string(name))), value(name, q))
			}
		}
		emit(g.Lifetime, base, c.clock.Since(n.Node.CreationTimestamp.Time).Seconds())
	}
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
