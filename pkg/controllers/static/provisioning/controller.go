package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
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
const Name = "provisioning.static"

const (
	// Resync re-checks every static pool, so nothing depends on catching
	// every NodeClaim event.
	Resync = time.Minute
	// unsyncedRequeue waits for the cluster state to hold every NodeClaim:
	// counting from a partial state would launch too many.
	unsyncedRequeue = time.Second
	// limitRequeue re-checks a pool held back by limits.nodes sooner, as
	// upstream does, since a limit is usually raised on purpose.
	limitRequeue = 30 * time.Second
	// createParallelism bounds concurrent NodeClaim creates per pool.
	createParallelism = 10
)

// Cluster is what the controller needs of the cluster state.
type Cluster interface {
	Synced(ctx context.Context) bool
	Nodes() []*state.StateNode
	// UpdateNodeClaim records a NodeClaim just created, so the next count
	// sees it before the informer does.
	UpdateNodeClaim(nc *v1.NodeClaim)
}

// Controller creates the NodeClaims static pools are missing.
type Controller struct {
	kube    client.Client
	cluster Cluster
	// mu serialises counting and creating, so two reconciles (a NodePool
	// event and a NodeClaim event, or a restart of the same key) cannot
	// both count the same gap and fill it twice.
	mu sync.Mutex
}

// NewController builds the controller.
func NewController(kube client.Client, cluster Cluster) *Controller {
	return &Controller{kube: kube, cluster: cluster}
}

// Counts are how many NodeClaims a static pool has, as the cluster state
// sees them.
type Counts struct {
	// Active are not being deleted. NodeClaims a disruption command marked
	// for deletion (a drifted node waiting for its replacement) still
	// count, so their replacement is not doubled.
	Active int64
	// Disrupting are the Active ones marked for deletion.
	Disrupting int64
}

// Count counts the NodeClaims of the pool in the cluster state.
func Count(nodes []*state.StateNode, pool string) Counts {
	var c Counts
	for _, n := range nodes {
		if n.NodeClaim == nil || n.NodeClaim.Labels[v1.NodePoolLabelKey] != pool || deleting(n) {
			continue
		}
		c.Active++
		if n.MarkedForDeletion() {
			c.Disrupting++
		}
	}
	return c
}

// deleting reports a NodeClaim or Node that is really being deleted, not
// only marked by a controller.
func deleting(n *state.StateNode) bool {
	return !n.NodeClaim.DeletionTimestamp.IsZero() || (n.Node != nil && !n.Node.DeletionTimestamp.IsZero())
}

// ToCreate is how many NodeClaims to create: the gap to replicas, capped by
// the headroom under limits.nodes.
func ToCreate(np *v1.NodePool, c Counts) (n int64, limited bool) {
	if np.Spec.Replicas == nil {
		return 0, false
	}
	n = *np.Spec.Replicas - c.Active
	if n <= 0 {
		return 0, false
	}
	if limit, ok := np.Spec.Limits[v1.ResourceNodes]; ok {
		headroom := limit.Value() - c.Active
		if headroom < n {
			return max(headroom, 0), true
		}
	}
	return n, false
}

// Register adds the controller to mgr. NodePools trigger on create, on a
// replicas change and when they become Ready; NodeClaims of a pool trigger
// it when they are deleted, so a lost node is replaced at once.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return staticpool.Register(mgr, Name, c,
		func(before, after *v1.NodePool) bool {
			return staticpool.Replicas(before) != staticpool.Replicas(after) || (!before.IsReady() && after.IsReady())
		},
		staticpool.ClaimEvents{Delete: true, Update: func(before, after client.Object) bool {
			return before.GetDeletionTimestamp().IsZero() && !after.GetDeletionTimestamp().IsZero()
		}})
}

// Reconcile creates the NodeClaims the pool lacks.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !np.IsStatic() || !np.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if !np.IsReady() {
		return reconcile.Result{RequeueAfter: Resync}, nil
	}
	if !c.cluster.Synced(ctx) {
		return reconcile.Result{RequeueAfter: unsyncedRequeue}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("NodePool", klog.KObj(np)))

	c.mu.Lock()
	defer c.mu.Unlock()
	counts := Count(c.cluster.Nodes(), np.Name)
	n, limited := ToCreate(np, counts)
	requeue := Resync
	if limited {
		log.FromContext(ctx).Info("nodepool node limit reached", "replicas", *np.Spec.Replicas, "nodes", counts.Active, "creating", n)
		requeue = limitRequeue
	}
	if n > 0 {
		if err := c.create(ctx, np, int(n)); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// create makes n NodeClaims for the pool in parallel and records each in
// the cluster state before returning, while the lock is still held.
func (c *Controller) create(ctx context.Context, np *v1.NodePool, n int) error {
	errs := make([]error, n)
	sem := make(chan struct{}, createParallelism)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("creating nodeclaim for static nodepool %s: panic: %v", np.Name, r)
				}
			}()
			nc := NodeClaimFor(np)
			if err := c.kube.Create(ctx, nc); err != nil {
				errs[i] = fmt.Errorf("creating nodeclaim for static nodepool %s: %w", np.Name, err)
				return
			}
			c.cluster.UpdateNodeClaim(nc)
			metrics.NodeClaimsCreatedTotal.WithLabelValues(metrics.ProvisionedReason, np.Name, "false").Inc()
			log.FromContext(ctx).Info("created nodeclaim", "NodeClaim", klog.KObj(nc), "requirements", requirementsString(nc))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func requirementsString(nc *v1.NodeClaim) string {
	out := ""
	for i, r := range nc.Spec.Requirements {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values)
	}
	return out
}
