// Package expiration owns forceful expiration: a NodeClaim older than its
// spec.expireAfter is deleted, without disruption budgets, without waiting
// for a replacement and regardless of karpenter.sh/do-not-disrupt. Only the
// deletion is forceful: the termination controller still drains the node
// honouring PDBs and do-not-disrupt until the terminationGracePeriod runs
// out, and the provisioner replaces capacity the evicted pods need.
package expiration

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// Name is the controller name, as upstream's.
const Name = "nodeclaim.expiration"

// Values of the termination_mode label: how the drain that follows the
// deletion is bounded, read from the NodeClaim's terminationGracePeriod.
const (
	terminationModeGraceful = "graceful" // no terminationGracePeriod: PDBs and do-not-disrupt hold the drain
	terminationModeEventual = "eventual" // a positive terminationGracePeriod bounds the drain
	terminationModeForceful = "forceful" // a zero terminationGracePeriod: pods are deleted at once
)

// Options tune the controller. The zero value is the production setup.
type Options struct {
	// Clock decides when a NodeClaim has expired.
	Clock clock.Clock
	// MaxConcurrentReconciles bounds parallel reconciles (10).
	MaxConcurrentReconciles int
}

// Controller deletes expired NodeClaims.
type Controller struct {
	kube    client.Client
	opts    Options
	managed func(*v1.NodeClaim) bool
}

// NewController builds the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 10
	}
	return &Controller{kube: kube, opts: opts, managed: cloudprovider.ManagedBy(kube.Scheme(), cloud)}
}

// Register adds the controller to mgr.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			nc, ok := o.(*v1.NodeClaim)
			return ok && c.managed(nc)
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles}).
		Complete(c)
}

// Reconcile deletes the NodeClaim once creationTimestamp+expireAfter has
// passed, and otherwise asks to come back exactly then.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !c.managed(nc) || !nc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	// expireAfter: Never.
	if nc.Spec.ExpireAfter.Duration == nil {
		return reconcile.Result{}, nil
	}
	expires := nc.CreationTimestamp.Add(*nc.Spec.ExpireAfter.Duration)
	if now := c.opts.Clock.Now(); now.Before(expires) {
		return reconcile.Result{RequeueAfter: expires.Sub(now)}, nil
	}
	// The resource-version precondition makes the deletion, and so the log
	// line and the metric, happen once: a reconcile that read a stale copy
	// from the cache (deleted already, but not yet showing it) fails with a
	// conflict instead of deleting again.
	err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID, ResourceVersion: &nc.ResourceVersion})
	switch {
	case apierrors.IsConflict(err):
		return reconcile.Result{Requeue: true}, nil
	case err != nil:
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("deleting expired nodeclaim %s: %w", nc.Name, err))
	}
	log.FromContext(ctx).V(1).Info("deleting expired nodeclaim")
	metrics.NodeClaimsDisruptedTotal.With(prometheus.Labels{
		metrics.ReasonLabel:       metrics.ExpiredReason,
		metrics.NodePoolLabel:     nc.Labels[v1.NodePoolLabelKey],
		metrics.CapacityTypeLabel: nc.Labels[v1.CapacityTypeLabelKey],
		// Expiration is not a consolidation decision; upstream leaves the
		// policy empty for involuntary reasons.
		metrics.ConsolidationPolicyLabel: "",
		metrics.TerminationModeLabel:     terminationMode(nc),
	}).Inc()
	return reconcile.Result{}, nil
}

func terminationMode(nc *v1.NodeClaim) string {
	switch tgp := nc.Spec.TerminationGracePeriod; {
	case tgp == nil:
		return terminationModeGraceful
	case tgp.Duration > 0:
		return terminationModeEventual
	default:
		return terminationModeForceful
	}
}
