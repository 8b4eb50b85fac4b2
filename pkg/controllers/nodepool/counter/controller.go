// Package counter owns a NodePool's status.resources and status.nodes: what
// the pool has provisioned, as the cluster state sees it. Status is what
// users and `kubectl get nodepools` read; the provisioner uses the state's
// live numbers directly.
package counter

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// Resync is how often each NodePool's counts are refreshed.
const Resync = 5 * time.Second

// Cluster is what the counter needs of the cluster state.
type Cluster interface {
	// Synced reports whether the state holds every Node and NodeClaim.
	Synced(ctx context.Context) bool
	// NodePoolResources is the capacity of the pool's nodes and in-flight
	// NodeClaims (those not being deleted), plus the "nodes" pseudo-resource
	// counting them.
	NodePoolResources(nodePool string) corev1.ResourceList
	// NodePoolOfferings are the offerings the pool's launched nodes run on,
	// one per node, with how much of each its pods request.
	NodePoolOfferings(nodePool string) []state.NodeOffering
}

// InstanceTypes prices offerings (the cloud provider).
type InstanceTypes interface {
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*cloudprovider.InstanceType, error)
}

// Controller writes status.resources and status.nodes, and the pool's
// usage, limit and cost metrics.
type Controller struct {
	kube    client.Client
	cluster Cluster
	types   InstanceTypes

	mu sync.Mutex
	// unpriced are, per pool, the NodeClaims already counted as
	// cost-tracker errors.
	unpriced map[string]map[string]bool
}

// NewController returns the counter controller; types prices the pools'
// nodes for karpenter_nodepools_cost_per_hour (nil: no cost metric).
func NewController(kube client.Client, cluster Cluster, types InstanceTypes) *Controller {
	return &Controller{kube: kube, cluster: cluster, types: types}
}

// Register adds the controller to mgr. NodePool status changes are ignored
// (they are mostly our own writes); counts are refreshed by Resync instead.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("nodepool.counter").
		For(&v1.NodePool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(c)
}

// Reconcile copies the pool's usage into its status.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !c.cluster.Synced(ctx) {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if client.IgnoreNotFound(err) == nil {
			metrics.NodePoolUsage.DeletePartialMatch(map[string]string{metrics.NodePoolLabel: req.Name})
			metrics.NodePoolLimit.DeletePartialMatch(map[string]string{metrics.NodePoolLabel: req.Name})
			metrics.NodePoolCostPerHour.DeleteLabelValues(req.Name)
			metrics.NodePoolCostTotal.DeleteLabelValues(req.Name)
			metrics.NodePoolUnpricedNodes.DeleteLabelValues(req.Name)
			metrics.NodePoolIdleCostPerHour.DeleteLabelValues(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	usage := Usage(c.cluster.NodePoolResources(np.Name))
	nodes := usage[v1.ResourceNodes]
	recordMetrics(np, usage)
	c.recordCost(ctx, np)

	stored := np.DeepCopy()
	np.Status.Resources = usage
	np.Status.Nodes = ptr(nodes.Value())
	if equality.Semantic.DeepEqual(stored.Status.Resources, np.Status.Resources) &&
		stored.Status.Nodes != nil && *stored.Status.Nodes == *np.Status.Nodes {
		return reconcile.Result{RequeueAfter: Resync}, nil
	}
	if err := c.kube.Status().Patch(ctx, np, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating nodepool %s status: %w", np.Name, err))
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// Usage fills in zeros for the well-known resources and nodes, so that an
// empty pool shows "cpu: 0" rather than nothing.
func Usage(in corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("0"),
		corev1.ResourceMemory:           resource.MustParse("0"),
		corev1.ResourcePods:             resource.MustParse("0"),
		corev1.ResourceEphemeralStorage: resource.MustParse("0"),
		v1.ResourceNodes:                resource.MustParse("0"),
	}
	for k, v := range in {
		out[k] = v.DeepCopy()
	}
	return out
}

func recordMetrics(np *v1.NodePool, usage corev1.ResourceList) {
	for name, q := range usage {
		metrics.NodePoolUsage.WithLabelValues(np.Name, string(name)).Set(q.AsApproximateFloat64())
	}
	for name, q := range np.Spec.Limits {
		metrics.NodePoolLimit.WithLabelValues(np.Name, string(name)).Set(q.AsApproximateFloat64())
	}
}

// recordCost prices the pool's launched nodes. A failed instance-type
// lookup leaves the last value: the cost of nodes that exist does not
// change because the catalog could not be read.
func (c *Controller) recordCost(ctx context.Context, np *v1.NodePool) {
	if c.types == nil {
		return
	}
	its, err := c.types.GetInstanceTypes(ctx, np)
	if err != nil {
		return
	}
	nodes := c.cluster.NodePoolOfferings(np.Name)
	cost, idle, unpriced := Cost(nodes, its)
	c.countUnpriced(np.Name, nodes, its)
	metrics.NodePoolCostPerHour.WithLabelValues(np.Name).Set(cost)
	metrics.NodePoolCostTotal.WithLabelValues(np.Name).Set(cost)
	metrics.NodePoolIdleCostPerHour.WithLabelValues(np.Name).Set(idle)
	metrics.NodePoolUnpricedNodes.WithLabelValues(np.Name).Set(float64(unpriced))
}

// countUnpriced counts each NodeClaim whose offering has no price once in
// karpenter_nodepools_cost_tracker_errors_total. Only the pool's current
// NodeClaims are remembered, so the memory stays bounded.
func (c *Controller) countUnpriced(pool string, nodes []state.NodeOffering, its []*cloudprovider.InstanceType) {
	prices := scheduling.OfferingPrices(its)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unpriced == nil {
		c.unpriced = map[string]map[string]bool{}
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if _, ok := prices[n.OfferingKey]; ok {
			continue
		}
		seen[n.NodeClaim] = true
		if !c.unpriced[pool][n.NodeClaim] {
			metrics.NodePoolCostTrackerErrorsTotal.WithLabelValues(pool, n.NodeClaim).Inc()
		}
	}
	c.unpriced[pool] = seen
}

// Cost sums the price of each node's offering among the instance types'
// offerings, and the part of it its pods leave unrequested (price times one
// minus utilization), and counts the nodes it found no price for.
func Cost(nodes []state.NodeOffering, its []*cloudprovider.InstanceType) (cost, idle float64, unpriced int) {
	prices := scheduling.OfferingPrices(its)
	for _, n := range nodes {
		p, ok := prices[n.OfferingKey]
		if !ok {
			unpriced++
			continue
		}
		cost += p
		idle += p * (1 - n.Utilization)
	}
	return cost, idle, unpriced
}

func ptr[T any](v T) *T { return &v }
