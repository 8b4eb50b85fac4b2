// Package nodeoverlay is the NodeOverlay controller (gate NodeOverlay): it
// evaluates every NodeOverlay against every NodePool's instance types
// (overlay.Evaluate), writes each overlay's ValidationSucceeded and Ready
// conditions (False with reason RuntimeValidation or Conflict), and
// publishes the result to the overlay decorator the other controllers read
// instance types through. A spec change to an overlay or a NodePool, and
// any change to a NodeClass (its status decides its types' offerings),
// re-evaluates everything; so does a timer, for the provider's catalog
// changing underneath.
package nodeoverlay

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/apis/v1alpha1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider/overlay"
)

// Name is the controller's name.
const Name = "nodeoverlay.controller"

// Resync is how often the overlays are re-evaluated without an event, as
// upstream's.
const Resync = 6 * time.Hour

// singleton is the one key every event maps to: one evaluation covers all.
var singleton = reconcile.Request{NamespacedName: types.NamespacedName{Name: "nodeoverlays"}}

// InstanceTypes is what the controller needs of the cloud provider: its
// instance types before any overlay, and its NodeClass kinds to watch.
type InstanceTypes interface {
	GetInstanceTypes(ctx context.Context, nodePool *v1.NodePool) ([]*cloudprovider.InstanceType, error)
	GetSupportedNodeClasses() []cloudprovider.NodeClass
}

// Controller evaluates the overlays and publishes the result.
type Controller struct {
	kube   client.Client
	cloud  InstanceTypes
	holder *overlay.Holder
}

// NewController returns the controller. cloud must be the provider without
// the overlay decorator: the overlays apply to what the provider reports.
func NewController(kube client.Client, cloud InstanceTypes, holder *overlay.Holder) *Controller {
	return &Controller{kube: kube, cloud: cloud, holder: holder}
}

// Register adds the controller to mgr.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	toSingleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{singleton}
	})
	changed := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	b := builder.ControllerManagedBy(mgr).Named(Name).
		Watches(&v1alpha1.NodeOverlay{}, toSingleton, changed).
		Watches(&v1.NodePool{}, toSingleton, changed).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1})
	for gk, newObj := range cloudprovider.SupportedKinds(mgr.GetScheme(), c.cloud.GetSupportedNodeClasses()) {
		if _, err := mgr.GetRESTMapper().RESTMapping(gk); err != nil {
			continue // CRD not installed: nothing to watch
		}
		// Every change, status included: a NodeClass's status (its
		// readiness, subnets' zones, images) decides which offerings its
		// instance types have, and an evaluation made before the class was
		// Ready priced none of them.
		b = b.Watches(newObj(), toSingleton)
	}
	return b.Complete(c)
}

// Reconcile evaluates every overlay against every NodePool, writes the
// overlays' conditions and publishes the result. A NodePool whose instance
// types cannot be listed is left unevaluated (the decorator refuses it) and
// the error is returned so the evaluation is retried with backoff.
func (c *Controller) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	overlays := &v1alpha1.NodeOverlayList{}
	if err := c.kube.List(ctx, overlays); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodeoverlays: %w", err)
	}
	pools := &v1.NodePoolList{}
	if err := c.kube.List(ctx, pools); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodepools: %w", err)
	}
	var evaluated []overlay.Pool
	var errs []error
	for i := range pools.Items {
		np := &pools.Items[i]
		its, err := c.cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing instance types of nodepool %s: %w", np.Name, err))
			continue
		}
		evaluated = append(evaluated, overlay.PoolOf(np, its))
	}
	store, verdicts := overlay.Evaluate(overlays.Items, evaluated)
	requeue, err := c.writeConditions(ctx, overlays.Items, verdicts)
	if err != nil {
		return reconcile.Result{}, err
	}
	if requeue {
		// An overlay changed or vanished while we wrote: evaluate again
		// before publishing what may be stale.
		return reconcile.Result{Requeue: true}, nil
	}
	c.holder.Publish(store)
	if len(errs) > 0 {
		return reconcile.Result{}, errors.Join(errs...)
	}
	return reconcile.Result{RequeueAfter: Resync}, nil
}

// writeConditions patches each overlay whose conditions changed. It
// reports a requeue when an overlay was modified or deleted meanwhile.
func (c *Controller) writeConditions(ctx context.Context, overlays []v1alpha1.NodeOverlay, verdicts map[string]overlay.Verdict) (bool, error) {
	var errs []error
	for i := range overlays {
		o := &overlays[i]
		stored := o.DeepCopy()
		v := verdicts[o.Name]
		var changed bool
		if v.Valid() {
			changed = o.SetValidation(metav1.ConditionTrue, "", "")
		} else {
			changed = o.SetValidation(metav1.ConditionFalse, v.Reason, v.Message)
		}
		if !changed {
			continue
		}
		if err := c.kube.Status().Patch(ctx, o, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return true, nil
			}
			errs = append(errs, fmt.Errorf("updating nodeoverlay %s status: %w", o.Name, err))
			continue
		}
		if !v.Valid() {
			log.FromContext(ctx).Info("nodeoverlay not applied", "NodeOverlay", o.Name, "reason", v.Reason, "message", v.Message)
		}
	}
	return false, errors.Join(errs...)
}
