// Package readiness owns a NodePool's NodeClassReady condition: it mirrors
// the Ready condition of the NodeClass the template references, so that the
// provisioner never plans nodes it could not launch.
package readiness

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
)

// NodeClassReady=False reasons (upstream's strings).
const (
	ReasonNodeClassNotFound         = "NodeClassNotFound"
	ReasonNodeClassTerminating      = "NodeClassTerminating"
	ReasonNodeClassReadinessUnknown = "NodeClassReadinessUnknown"
)

// NodeClasses names the NodeClass kinds a NodePool may reference; the
// cloud provider implements it.
type NodeClasses interface {
	GetSupportedNodeClasses() []cloudprovider.NodeClass
}

// Controller sets NodeClassReady (and Ready) on NodePools.
type Controller struct {
	kube client.Client
	// classes builds an empty object per supported NodeClass kind.
	classes map[schema.GroupKind]func() cloudprovider.NodeClass
}

// NewController returns the readiness controller for the NodeClass kinds the
// cloud provider supports; a kind the client's scheme does not know is left
// out (its pools read NodeClassNotFound).
func NewController(kube client.Client, provider NodeClasses) *Controller {
	return &Controller{kube: kube, classes: cloudprovider.SupportedKinds(kube.Scheme(), provider.GetSupportedNodeClasses())}
}

// Register adds the controller to mgr. It also watches each NodeClass kind
// whose CRD is installed, so a NodeClass turning Ready updates its pools at
// once rather than at the next resync.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	b := builder.ControllerManagedBy(mgr).Named("nodepool.readiness").For(&v1.NodePool{})
	for gk, newObj := range c.classes {
		if _, err := mgr.GetRESTMapper().RESTMapping(gk); err != nil {
			continue // CRD not installed: nothing to watch
		}
		b = b.Watches(newObj(), handler.EnqueueRequestsFromMapFunc(c.poolsFor(gk)))
	}
	return b.Complete(c)
}

// poolsFor maps a NodeClass event to the NodePools referencing it.
func (c *Controller) poolsFor(gk schema.GroupKind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &v1.NodePoolList{}
		if err := c.kube.List(ctx, list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, np := range list.Items {
			ref := np.Spec.Template.Spec.NodeClassRef
			if ref != nil && ref.Name == obj.GetName() && ref.GroupKind() == gk {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: np.Name}})
			}
		}
		return out
	}
}

// Reconcile mirrors the NodeClass's readiness onto the NodePool.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := np.DeepCopy()
	status, reason, message, generation, err := c.nodeClassReadiness(ctx, np)
	if err != nil {
		return reconcile.Result{}, err
	}
	changed := np.SetCondition(v1.ConditionTypeNodeClassReady, status, reason, message)
	if generation != 0 && np.Status.NodeClassObservedGeneration != generation {
		np.Status.NodeClassObservedGeneration = generation
		changed = true
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	if err := c.kube.Status().Patch(ctx, np, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// Another NodePool controller wrote its condition first.
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating nodepool %s status: %w", np.Name, err))
	}
	return reconcile.Result{}, nil
}

// nodeClassReadiness returns the NodeClassReady condition for np and the
// NodeClass generation it was derived from (0 when there is none).
func (c *Controller) nodeClassReadiness(ctx context.Context, np *v1.NodePool) (metav1.ConditionStatus, string, string, int64, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return metav1.ConditionFalse, ReasonNodeClassNotFound, "NodeClass not found on cluster", 0, nil
	}
	newObj, ok := c.classes[ref.GroupKind()]
	if !ok {
		return metav1.ConditionFalse, ReasonNodeClassNotFound,
			fmt.Sprintf("NodeClass kind %s is not supported", ref.GroupKind()), 0, nil
	}
	class := newObj()
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return metav1.ConditionFalse, ReasonNodeClassNotFound, "NodeClass not found on cluster", 0, nil
		}
		return "", "", "", 0, fmt.Errorf("getting nodeclass %s: %w", ref.Name, err)
	}
	ready := meta.FindStatusCondition(class.GetConditions(), v1.ConditionTypeReady)
	switch {
	case ready == nil || ready.Status == metav1.ConditionUnknown:
		return metav1.ConditionFalse, ReasonNodeClassReadinessUnknown, "Node Class Readiness Unknown", class.GetGeneration(), nil
	case !class.GetDeletionTimestamp().IsZero():
		return metav1.ConditionFalse, ReasonNodeClassTerminating, "Node Class is Terminating", class.GetGeneration(), nil
	case ready.Status == metav1.ConditionFalse:
		return metav1.ConditionFalse, ready.Reason, ready.Message, class.GetGeneration(), nil
	}
	return metav1.ConditionTrue, "", "", class.GetGeneration(), nil
}
