// Package node publishes upstream's per-node resource gauges
// (karpenter_nodes_allocatable, _total_pod_requests, _total_pod_limits,
// _total_daemon_requests, _total_daemon_limits, _system_overhead,
// _current_lifetime_seconds), computed from the cluster state at each
// scrape, and karpenter_cluster_utilization_percent, every 5 seconds.
package node

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
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
// them from the cluster state (a Collector), and a deleted node's series
// are gone at the next one. It
// keeps, per current node, what its series are made of (label pairs and
// summed resources) while the node's objects are unchanged, so a scrape of
// an unchanged cluster rebuilds none of it.
type Controller struct {
	cluster Cluster
	clock   clock.Clock
	gauges  *metrics.NodeGauges
	descs   map[*prometheus.GaugeVec]*prometheus.Desc
	order   labelOrder
	// listVecs are the gauges of a node's resource lists, in their order.
	listVecs [lists]*prometheus.GaugeVec
	// mu guards entries, each node's entry from the last scrape or pass.
	mu      sync.Mutex
	entries map[string]*nodeEntry
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
	c.order = newLabelOrder(c.gauges)
	g := c.gauges
	c.listVecs = [lists]*prometheus.GaugeVec{g.Allocatable, g.TotalPodRequests, g.TotalPodLimits, g.TotalDaemonRequests, g.TotalDaemonLimits, g.SystemOverhead}
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
	for _, e := range c.refreshed() {
		addInto(allocatable, e.allocatable)
		addInto(requested, e.lists[totalPodRequests])
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
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.refresh() {
		for i, vec := range c.listVecs {
			for name, q := range e.lists[i] {
				ch <- &metrics.GaugeSample{Family: c.descs[vec], Labels: e.withResource(c.order, name), Value: value(name, q)}
			}
		}
		ch <- &metrics.GaugeSample{Family: c.descs[c.gauges.Lifetime], Labels: e.base, Value: c.clock.Since(e.node.CreationTimestamp.Time).Seconds()}
	}
}

// The resource lists of a node, in the order of Controller.listVecs.
const (
	allocatableList = iota
	totalPodRequests
	totalPodLimits
	totalDaemonRequests
	totalDaemonLimits
	systemOverhead
	lists
)

// refreshed is refresh under c.mu (released even if refresh panics: the
// pass recovers, and scrapes must not block on a lock it left held).
func (c *Controller) refreshed() []*nodeEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refresh()
}

// refresh returns an entry for each node of the cluster state, keeping
// the previous entry of a node whose Node, NodeClaim, management and pods
// are the same objects as then, and forgets nodes that are gone. c.mu must be
// held.
func (c *Controller) refresh() []*nodeEntry {
	nodes := c.cluster.Nodes()
	out := make([]*nodeEntry, 0, len(nodes))
	seen := make(map[string]*nodeEntry, len(c.entries))
	for _, n := range nodes {
		if n.Node == nil {
			continue
		}
		e, ok := c.entries[n.Node.Name]
		if !ok || !e.holds(n) {
			e = c.newEntry(n)
		}
		seen[n.Node.Name] = e
		out = append(out, e)
	}
	c.entries = seen
	return out
}

// nodeEntry is what a node's series are made of: its label pairs, sorted
// by name as the exposition wants them (base for the lifetime gauge, and
// per resource type for the others) and shared by its samples from one
// scrape to the next while its objects are unchanged (building them anew
// for every series of every node was most of what a scrape allocated at
// 1,000 nodes), and its resource lists.
type nodeEntry struct {
	// node, nodeClaim, managed and pods are what the entry was built from;
	// the informer replaces an object on every change, so the same objects
	// mean the same labels, phase, resources and requests.
	node        *corev1.Node
	nodeClaim   *v1.NodeClaim
	managed     bool
	pods        map[types.NamespacedName]*corev1.Pod
	allocatable corev1.ResourceList
	lists       [lists]corev1.ResourceList
	base        []*dto.LabelPair
	byType      map[corev1.ResourceName][]*dto.LabelPair
}

func (e *nodeEntry) holds(n *state.StateNode) bool {
	if e.node != n.Node || e.nodeClaim != n.NodeClaim || e.managed != n.Managed() || len(e.pods) != len(n.Pods) {
		return false
	}
	for k, p := range n.Pods {
		if e.pods[k] != p {
			return false
		}
	}
	return true
}

// labelOrder places the gauges' label names in sorted order: base[i] is
// where the i-th label value (as labelValues lists them) goes, and
// resourceAt is where resource_type goes among the base labels.
type labelOrder struct {
	names      []string
	base       []int
	resourceAt int
}

func newLabelOrder(g *metrics.NodeGauges) labelOrder {
	names := append(append([]string{}, g.LabelNames...), metrics.NodeNameLabel, metrics.NodePhaseLabel, metrics.ManagedLabel)
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	o := labelOrder{names: sorted, base: make([]int, len(names))}
	for i, name := range names {
		o.base[i], _ = slices.BinarySearch(sorted, name)
	}
	o.resourceAt, _ = slices.BinarySearch(sorted, metrics.ResourceTypeLabel)
	return o
}

func (c *Controller) newEntry(n *state.StateNode) *nodeEntry {
	values := c.labelValues(n)
	e := &nodeEntry{node: n.Node, nodeClaim: n.NodeClaim, managed: n.Managed(), pods: n.Pods, allocatable: n.Allocatable(),
		base: make([]*dto.LabelPair, len(values)), byType: map[corev1.ResourceName][]*dto.LabelPair{}}
	for i := range values {
		at := c.order.base[i]
		e.base[at] = &dto.LabelPair{Name: &c.order.names[at], Value: &values[i]}
	}
	daemonRequests, daemonLimits := n.DaemonSetRequests(), n.DaemonSetLimits()
	e.lists = [lists]corev1.ResourceList{
		allocatableList:     n.Node.Status.Allocatable,
		totalPodRequests:    sum(n.PodRequests(), daemonRequests),
		totalPodLimits:      sum(n.PodLimits(), daemonLimits),
		totalDaemonRequests: daemonRequests,
		totalDaemonLimits:   daemonLimits,
		systemOverhead:      subtract(n.Node.Status.Capacity, n.Node.Status.Allocatable),
	}
	return e
}

// withResource is the node's pairs with resource_type set to name.
func (e *nodeEntry) withResource(o labelOrder, name corev1.ResourceName) []*dto.LabelPair {
	if pairs, ok := e.byType[name]; ok {
		return pairs
	}
	resourceLabel, value := metrics.ResourceTypeLabel, metrics.LabelName(string(name))
	pairs := make([]*dto.LabelPair, 0, len(e.base)+1)
	pairs = append(pairs, e.base[:o.resourceAt]...)
	pairs = append(pairs, &dto.LabelPair{Name: &resourceLabel, Value: &value})
	pairs = append(pairs, e.base[o.resourceAt:]...)
	e.byType[name] = pairs
	return pairs
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
