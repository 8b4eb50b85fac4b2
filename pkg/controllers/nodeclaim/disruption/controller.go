package disruption

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/controllers/internal/guardedpatch"
)

// Name is the controller name, as upstream's.
const Name = "nodeclaim.disruption"

// Options tune the controller. The zero value is the production setup.
type Options struct {
	// Clock drives condition transition times, consolidateAfter and the
	// instance-type check's age gate and cache.
	Clock clock.Clock
	// MaxConcurrentReconciles bounds parallel reconciles (10).
	MaxConcurrentReconciles int
}

// Controller sets and clears the Drifted and Consolidatable conditions of
// the NodeClaims of NodePools.
type Controller struct {
	kube    client.Client
	opts    Options
	managed func(*v1.NodeClaim) bool
	cloud   cloudprovider.CloudProvider

	drift         *drift
	consolidation *consolidation
}

// NewController builds the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 10
	}
	return &Controller{
		kube:          kube,
		opts:          opts,
		cloud:         cloud,
		managed:       cloudprovider.ManagedBy(kube.Scheme(), cloud),
		drift:         newDrift(cloud, opts.Clock),
		consolidation: &consolidation{clock: opts.Clock},
	}
}

// Register adds the controller to mgr. Besides its NodeClaims, a NodePool
// change (template, requirements, consolidateAfter, hash) and a NodeClass
// change (provider drift) re-evaluate the NodeClaims they concern.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			nc, ok := o.(*v1.NodeClaim)
			return ok && c.managed(nc)
		}))).
		Watches(&v1.NodePool{}, handler.EnqueueRequestsFromMapFunc(c.nodePoolToNodeClaims),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: nodePoolChanged})).
		WithOptions(controller.Options{MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles})
	for _, nodeClass := range c.cloud.GetSupportedNodeClasses() {
		b = b.Watches(nodeClass, handler.EnqueueRequestsFromMapFunc(c.nodeClassToNodeClaims))
	}
	return b.Complete(c)
}

// nodePoolChanged passes a NodePool update that can change its NodeClaims'
// conditions: its spec (the generation) or its annotations (the template
// hash). The NodePool counter rewrites the status every few seconds, and
// each of those writes would otherwise re-evaluate every NodeClaim of the
// pool.
func nodePoolChanged(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
		!maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()) ||
		e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
}

func (c *Controller) nodePoolToNodeClaims(ctx context.Context, o client.Object) []reconcile.Request {
	return c.requests(ctx, client.MatchingLabels{v1.NodePoolLabelKey: o.GetName()}, func(*v1.NodeClaim) bool { return true })
}

func (c *Controller) nodeClassToNodeClaims(ctx context.Context, o client.Object) []reconcile.Request {
	return c.requests(ctx, nil, func(nc *v1.NodeClaim) bool {
		return nc.Spec.NodeClassRef != nil && nc.Spec.NodeClassRef.Name == o.GetName()
	})
}

func (c *Controller) requests(ctx context.Context, selector client.ListOption, keep func(*v1.NodeClaim) bool) []reconcile.Request {
	list := &v1.NodeClaimList{}
	var opts []client.ListOption
	if selector != nil {
		opts = append(opts, selector)
	}
	// Only names, labels and node class references are read.
	opts = append(opts, client.UnsafeDisableDeepCopy)
	if err := c.kube.List(ctx, list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "listing nodeclaims to re-evaluate disruption conditions")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		if nc := &list.Items[i]; keep(nc) && c.managed(nc) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
		}
	}
	return out
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !c.managed(nc) || !nc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if nc.Status.NodeName != "" {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("Node", nc.Status.NodeName))
	}
	// Standalone NodeClaims (no NodePool) have nothing to drift from and
	// no consolidateAfter; a missing NodePool is about to take its
	// NodeClaims with it.
	poolName, ok := nc.Labels[v1.NodePoolLabelKey]
	if !ok {
		return reconcile.Result{}, nil
	}
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, types.NamespacedName{Name: poolName}, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("getting nodepool %s: %w", poolName, err))
	}

	stored := nc.DeepCopy()
	var results []reconcile.Result
	var errs []error
	res, err := c.drift.reconcile(ctx, np, nc)
	results, errs = append(results, res), append(errs, err)
	// Static pools are never consolidated, so their NodeClaims are never
	// marked consolidatable.
	if np.Spec.Replicas == nil {
		res, err = c.consolidation.reconcile(ctx, np, nc)
		results, errs = append(results, res), append(errs, err)
	} else {
		nc.RemoveCondition(v1.ConditionTypeConsolidatable)
	}
	if !equality.Semantic.DeepEqual(stored, nc) {
		// The guard matters: the patch replaces the whole conditions
		// list, which would undo a concurrent lifecycle write.
		if err := guardedpatch.PatchStatus(ctx, c.kube, stored, nc); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("patching nodeclaim %s status: %w", nc.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	return minResult(results...), nil
}

// minResult is the earliest requeue any part asked for.
func minResult(results ...reconcile.Result) reconcile.Result {
	var out reconcile.Result
	for _, r := range results {
		if r.RequeueAfter > 0 && (out.RequeueAfter == 0 || r.RequeueAfter < out.RequeueAfter) {
			out.RequeueAfter = r.RequeueAfter
		}
	}
	return out
}

// setTrue sets a condition True with reason and message, keeping the
// transition time when it already was True.
func setTrue(nc *v1.NodeClaim, now time.Time, conditionType, reason, message string) {
	nc.SetCondition(now, conditionType, "True", reason, message)
}
