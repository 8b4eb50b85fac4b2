// Package hash owns the controller that keeps the karpenter.sh/nodepool-hash
// annotation of every NodePool current (the value is NodePool.Hash) and
// re-stamps its NodeClaims when the hash version changes.
package hash

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider/hashstamp"
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
	keys := hashstamp.Annotations{Hash: v1.NodePoolHashAnnotationKey, Version: v1.NodePoolHashVersionAnnotationKey, CurrentVersion: v1.NodePoolHashVersion}
	return reconcile.Result{}, hashstamp.Stamp(ctx, c.kube, np, keys, np.Hash(), func() ([]v1.NodeClaim, error) {
		list := &v1.NodeClaimList{}
		if err := c.kube.List(ctx, list, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}); err != nil {
			return nil, fmt.Errorf("listing nodeclaims of nodepool %s: %w", np.Name, err)
		}
		return list.Items, nil
	})
}
