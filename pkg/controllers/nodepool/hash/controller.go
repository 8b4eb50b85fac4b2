package hash

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Controller keeps the nodepool-hash annotations of each NodePool current.
type Controller struct {
	kube client.Client
}

// NewController returns the hash controller.
func NewController(kube client.Client) *Controller {
	return &Controller{kube: kube}
}

// Register adds the controller to mgr; it reacts to spec changes only.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("nodepool.hash").
		For(&v1.NodePool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(c)
}

// Reconcile stamps the hash on the NodePool. When the NodePool still carries
// an older hash version, its NodeClaims are re-stamped first: their old hash
// was computed differently, so comparing it with the new one would report
// every NodeClaim as drifted.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !np.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	want := NodePool(np)
	if np.Annotations[v1.NodePoolHashVersionAnnotationKey] != v1.NodePoolHashVersion {
		if err := c.restampNodeClaims(ctx, np, want); err != nil {
			return reconcile.Result{}, err
		}
	}
	if np.Annotations[v1.NodePoolHashAnnotationKey] == want &&
		np.Annotations[v1.NodePoolHashVersionAnnotationKey] == v1.NodePoolHashVersion {
		return reconcile.Result{}, nil
	}
	stored := np.DeepCopy()
	if np.Annotations == nil {
		np.Annotations = map[string]string{}
	}
	np.Annotations[v1.NodePoolHashAnnotationKey] = want
	np.Annotations[v1.NodePoolHashVersionAnnotationKey] = v1.NodePoolHashVersion
	if err := c.kube.Patch(ctx, np, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("patching nodepool %s hash: %w", np.Name, err))
	}
	return reconcile.Result{}, nil
}

// restampNodeClaims moves the pool's NodeClaims to the current hash version.
// Already drifted NodeClaims keep their old hash so that they stay drifted.
func (c *Controller) restampNodeClaims(ctx context.Context, np *v1.NodePool, hash string) error {
	list := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, list, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}); err != nil {
		return fmt.Errorf("listing nodeclaims of nodepool %s: %w", np.Name, err)
	}
	for i := range list.Items {
		nc := &list.Items[i]
		if nc.Annotations[v1.NodePoolHashVersionAnnotationKey] == v1.NodePoolHashVersion {
			continue
		}
		stored := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		if !meta.IsStatusConditionTrue(nc.GetConditions(), v1.ConditionTypeDrifted) {
			nc.Annotations[v1.NodePoolHashAnnotationKey] = hash
		}
		nc.Annotations[v1.NodePoolHashVersionAnnotationKey] = v1.NodePoolHashVersion
		if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("re-stamping nodeclaim %s: %w", nc.Name, err)
		}
	}
	return nil
}
