// Package garbagecollection reconciles the cluster's NodeClaims with the
// cloud provider's instances in both directions: a registered NodeClaim
// whose instance vanished (and whose Node is gone or not Ready) is deleted,
// and an instance no NodeClaim accounts for, once older than a grace period,
// is terminated, and its Node deleted, so crashes and lost writes cannot leak
// machines or leave their Nodes behind.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/index"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/recovery"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// Name is the controller name.
const Name = "nodeclaim.garbagecollection"

// Defaults for Options.
const (
	DefaultInterval = 2 * time.Minute
	// DefaultLeakGracePeriod leaves a fresh instance alone long enough for
	// the launch that created it to record its provider ID.
	DefaultLeakGracePeriod = 30 * time.Second
)

// Options tune the controller; the zero value is the production setup.
type Options struct {
	Clock           clock.Clock
	Interval        time.Duration
	LeakGracePeriod time.Duration
}

// Controller runs a garbage-collection pass every Interval.
type Controller struct {
	kube  client.Client
	cloud cloudprovider.CloudProvider
	opts  Options

	// firstSeen is when a pass first listed an instance the provider
	// reports no creation time for: its age counts from there, so such an
	// instance is never taken for an old leak the moment it appears.
	mu        sync.Mutex
	firstSeen map[string]time.Time
}

// NewController builds the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.LeakGracePeriod <= 0 {
		opts.LeakGracePeriod = DefaultLeakGracePeriod
	}
	return &Controller{kube: kube, cloud: cloud, opts: opts, firstSeen: map[string]time.Time{}}
}

// Register runs the periodic pass under the manager (leader only).
func (c *Controller) Register(ctx context.Context, mgr manager.Manager) error {
	if err := index.RegisterIndexes(ctx, mgr); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(c.Start))
}

// Start runs a pass every Interval until ctx ends. A pass that panics is
// logged with its stack and the loop carries on: a leak left for one more
// interval is better than a controller that is down.
func (c *Controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("controller", Name))
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			var err error
			if perr := recovery.Do(ctx, Name, func() { err = c.Reconcile(ctx) }); perr != nil {
				continue // already logged with its stack
			}
			if err != nil {
				log.FromContext(ctx).Error(err, "garbage collection failed")
			}
		}
	}
}

// Reconcile runs one pass in both directions.
func (c *Controller) Reconcile(ctx context.Context) error {
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	list := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, list); err != nil {
		return fmt.Errorf("listing nodeclaims: %w", err)
	}
	return errors.Join(c.collectNodeClaims(ctx, list.Items, instances), c.collectInstances(ctx, list.Items, instances))
}

// collectNodeClaims deletes registered NodeClaims whose instance the
// provider no longer lists. A Ready Node proves the machine is alive
// whatever the provider says, so those are left alone.
func (c *Controller) collectNodeClaims(ctx context.Context, claims []v1.NodeClaim, instances []*v1.NodeClaim) error {
	alive := sets.New[string]()
	for _, in := range instances {
		alive.Insert(in.Status.ProviderID)
	}
	var errs []error
	for i := range claims {
		nc := &claims[i]
		if !nc.DeletionTimestamp.IsZero() || !nc.IsTrue(v1.ConditionTypeRegistered) ||
			nc.Status.ProviderID == "" || alive.Has(nc.Status.ProviderID) {
			continue
		}
		nodes, err := index.NodesForProviderID(ctx, c.kube, nc.Status.ProviderID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ready := false
		for _, n := range nodes {
			ready = ready || scheduling.NodeReady(n)
		}
		if ready {
			continue
		}
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting nodeclaim %s: %w", nc.Name, err))
			continue
		}
		log.FromContext(ctx).Info("garbage collecting nodeclaim with no cloudprovider representation",
			"NodeClaim", map[string]string{"name": nc.Name}, "provider-id", nc.Status.ProviderID,
			"nodepool", nc.Labels[v1.NodePoolLabelKey], "reason", "garbage_collected")
	}
	return errors.Join(errs...)
}

// collectInstances terminates instances no NodeClaim accounts for. A
// NodeClaim that has launched but not yet stored its provider ID is
// matched by name, and the grace period covers the rest of that window.
func (c *Controller) collectInstances(ctx context.Context, claims []v1.NodeClaim, instances []*v1.NodeClaim) error {
	ids, names := sets.New[string](), sets.New[string]()
	for i := range claims {
		if claims[i].Status.ProviderID != "" {
			ids.Insert(claims[i].Status.ProviderID)
		} else {
			names.Insert(claims[i].Name)
		}
	}
	now := c.opts.Clock.Now()
	created := c.creationTimes(instances, now)
	var errs []error
	for _, in := range instances {
		if in.Status.ProviderID == "" || ids.Has(in.Status.ProviderID) || (in.Name != "" && names.Has(in.Name)) {
			continue
		}
		if now.Sub(created[in.Status.ProviderID]) < c.opts.LeakGracePeriod {
			continue
		}
		if err := c.cloud.Delete(ctx, in); cloudprovider.IgnoreNodeClaimNotFoundError(err) != nil {
			errs = append(errs, fmt.Errorf("terminating leaked instance %s: %w", in.Status.ProviderID, err))
			continue
		}
		log.FromContext(ctx).Info("garbage collecting instance with no nodeclaim", "provider-id", in.Status.ProviderID)
		if err := c.deleteNodes(ctx, in.Status.ProviderID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteNodes deletes the Node objects of a leaked instance: with no
// NodeClaim nothing else would, and a Node left behind keeps pods bound to
// a machine that is going away. A Node carrying the termination finalizer
// goes through the node termination controller as usual.
func (c *Controller) deleteNodes(ctx context.Context, providerID string) error {
	nodes, err := index.NodesForProviderID(ctx, c.kube, providerID)
	if err != nil {
		return fmt.Errorf("finding nodes of leaked instance %s: %w", providerID, err)
	}
	var errs []error
	for _, node := range nodes {
		if !node.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting node %s of leaked instance %s: %w", node.Name, providerID, err))
			continue
		}
		log.FromContext(ctx).Info("garbage collecting node with no nodeclaim", "Node", map[string]string{"name": node.Name}, "provider-id", providerID)
	}
	return errors.Join(errs...)
}

// creationTimes returns each listed instance's creation time; for one the
// provider gives none, the time a pass first listed it. Instances no longer
// listed are forgotten.
func (c *Controller) creationTimes(instances []*v1.NodeClaim, now time.Time) map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(instances))
	seen := make(map[string]time.Time, len(c.firstSeen))
	for _, in := range instances {
		id := in.Status.ProviderID
		if !in.CreationTimestamp.IsZero() {
			out[id] = in.CreationTimestamp.Time
			continue
		}
		first, ok := c.firstSeen[id]
		if !ok {
			first = now
		}
		seen[id] = first
		out[id] = first
	}
	c.firstSeen = seen
	return out
}
