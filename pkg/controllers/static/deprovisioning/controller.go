package deprovisioning

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/controllers/static/internal/staticpool"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// Name is the controller name.
const Name = "static.deprovisioning"

// Resync re-checks every static pool.
const Resync = time.Minute

// Cluster is what the controller needs of the cluster state.
type Cluster interface {
	Nodes() []*state.StateNode
	// MarkForDeletion records a NodeClaim just deleted, so the next count
	// leaves it out before the informer sees its deletion timestamp.
	MarkForDeletion(names ...string)
}

// Controller deletes the NodeClaims static pools have too many of.
type Controller struct {
	kube    client.Client
	cluster Cluster
	clock   clock.Clock
	// mu makes count-and-delete atomic across reconciles.
	mu sync.Mutex
}

// NewController builds the controller; a nil clock is the real one.
func NewController(kube client.Client, cluster Cluster, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller{kube: kube, cluster: cluster, clock: clk}
}

// Register adds the controller to mgr: NodePools trigger it on create and
// on a replicas change, new NodeClaims of a pool (which may overshoot
// after a quick scale-down) trigger their pool.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return staticpool.Register(mgr, Name, c,
		func(before, after *v1.NodePool) bool {
			return staticpool.Replicas(before) != staticpool.Replicas(after)
		},
		staticpool.ClaimEvents{Create: true})
}

// Reconcile deletes the pool's surplus NodeClaims. It does not wait for
// the cluster state to sync: a partial state can only hold fewer
// NodeClaims than exist, which errs towards deleting too few, and the next
// pass catches up.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !np.IsStatic() || !np.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := c.cluster.Nodes()
	// Only NodeClaims nobody is removing count: one a disruption command
	// marked is leaving with its replacement already counted, and counting
	// both would delete a healthy node.
	running := int64(0)
	for _, n := range nodes {
		if n.NodeClaim != nil && n.NodeClaim.Labels[v1.NodePoolLabelKey] == np.Name && !n.Deleting() {
			running++
		}
	}
	surplus := running - *np.Spec.Replicas
	if surplus <= 0 {
		return reconcile.Result{RequeueAfter: Resync}, nil
	}
	logger := log.FromContext(ctx).WithValues("NodePool", klog.KObj(np))
	logger.Info("deprovisioning nodeclaims to satisfy replica count", "current", running, "desired", *np.Spec.Replicas, "deprovision-count", surplus)
	victims := Surplus(nodes, np.Name, int(surplus), c.clock.Now())
	var errs []error
	for _, nc := range victims {
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting nodeclaim %s of static nodepool %s: %w", nc.Name, np.Name, err))
			continue
		}
		c.cluster.MarkForDeletion(nc.Name)
		metrics.NodeClaimsDisruptedTotal.WithLabelValues(metrics.OverprovisionedReason, np.Name, nc.Labels[v1.CapacityTypeLabelKey], "", "").Inc()
		logger.V(1).Info("deleting nodeclaim", "NodeClaim", klog.KObj(nc))
	}
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}
