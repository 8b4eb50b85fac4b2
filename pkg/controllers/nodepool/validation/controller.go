package validation

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// ReasonValidationFailed is the ValidationSucceeded=False reason.
const ReasonValidationFailed = "NodePoolValidationFailed"

// Controller reports RuntimeValidate as the ValidationSucceeded condition.
type Controller struct {
	kube client.Client
}

// NewController returns the validation controller.
func NewController(kube client.Client) *Controller {
	return &Controller{kube: kube}
}

// Register adds the controller to mgr; only spec changes can change the
// verdict.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("nodepool.validation").
		For(&v1.NodePool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(c)
}

// Reconcile validates the NodePool and writes the condition (and Ready).
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := np.DeepCopy()
	var changed bool
	if err := RuntimeValidate(np); err != nil {
		changed = np.SetCondition(v1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, ReasonValidationFailed, err.Error())
	} else {
		changed = np.SetCondition(v1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, "", "")
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	// Optimistic lock: the readiness controller writes the same list.
	if err := c.kube.Status().Patch(ctx, np, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// Another NodePool controller wrote its condition first.
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating nodepool %s status: %w", np.Name, err))
	}
	return reconcile.Result{}, nil
}
