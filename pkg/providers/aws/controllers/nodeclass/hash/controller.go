// Package hash owns the karpenter.k8s.aws/ec2nodeclass-hash annotations on
// EC2NodeClasses, as upstream's nodeclass hash controller does. The class
// carries the hash of its current spec (EC2NodeClass.Hash) and the hash
// version; a NodeClaim carries the values its instance was launched with
// (stamped by the cloud provider's Create), and IsDrifted reports
// NodeClassDrift when the two hashes differ under the same version.
//
// When the class still carries an older hash version, the hash algorithm
// has changed since its NodeClaims were stamped: their hashes are not
// comparable with the new one, so they are re-stamped with the current hash
// first (and then the class), which keeps an upgrade from drifting every
// node. NodeClaims already marked Drifted keep their old hash and so stay
// drifted.
package hash

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider/hashstamp"
)

// Controller keeps each EC2NodeClass's hash annotations current.
type Controller struct {
	kube     client.Client
	caBundle *string
}

// NewController returns the hash controller. caBundle is the cluster CA
// bundle the hash includes (see EC2NodeClass.Hash); the cloud provider must
// stamp NodeClaims with the same one.
func NewController(kube client.Client, caBundle *string) *Controller {
	return &Controller{kube: kube, caBundle: caBundle}
}

// Name is the controller's name in logs and metrics.
func (c *Controller) Name() string { return "nodeclass.hash" }

// Register adds the controller to mgr. Only spec changes (a new
// generation) can move the hash; annotation edits are watched too so that
// a removed or hand-edited annotation is restored.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named(c.Name()).
		For(&awsv1.EC2NodeClass{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(c)
}

// Reconcile stamps the hash on one EC2NodeClass, re-stamping its NodeClaims
// first when the class's hash version is not the current one.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nodeClass := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, nodeClass); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !nodeClass.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	keys := hashstamp.Annotations{Hash: awsv1.AnnotationEC2NodeClassHash, Version: awsv1.AnnotationEC2NodeClassHashVersion, CurrentVersion: awsv1.EC2NodeClassHashVersion}
	return reconcile.Result{}, hashstamp.Stamp(ctx, c.kube, nodeClass, keys, nodeClass.Hash(c.caBundle), func() ([]v1.NodeClaim, error) {
		// No field index is assumed (the wiring may not register one); the
		// list comes from the manager's cache, so filtering here is cheap.
		list := &v1.NodeClaimList{}
		if err := c.kube.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing nodeclaims of ec2nodeclass %s: %w", nodeClass.Name, err)
		}
		var out []v1.NodeClaim
		for _, nc := range list.Items {
			if ref := nc.Spec.NodeClassRef; ref != nil && ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass" && ref.Name == nodeClass.Name {
				out = append(out, nc)
			}
		}
		return out, nil
	})
}
