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

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Controller keeps each EC2NodeClass's hash annotations current.
type Controller struct {
	kube client.Client
}

// NewController returns the hash controller.
func NewController(kube client.Client) *Controller {
	return &Controller{kube: kube}
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
	want := nodeClass.Hash()
	if nodeClass.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
		// NodeClaims before the class: if this fails the class keeps its
		// old version and the next attempt re-stamps again.
		if err := c.restampNodeClaims(ctx, nodeClass, want); err != nil {
			return reconcile.Result{}, err
		}
	}
	if nodeClass.Annotations[awsv1.AnnotationEC2NodeClassHash] == want &&
		nodeClass.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion {
		return reconcile.Result{}, nil
	}
	stored := nodeClass.DeepCopy()
	if nodeClass.Annotations == nil {
		nodeClass.Annotations = map[string]string{}
	}
	nodeClass.Annotations[awsv1.AnnotationEC2NodeClassHash] = want
	nodeClass.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	// A merge patch of two annotation keys: it cannot drop anything else
	// written meanwhile, so no optimistic lock is needed.
	if err := c.kube.Patch(ctx, nodeClass, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("patching ec2nodeclass %s hash: %w", nodeClass.Name, err))
	}
	return reconcile.Result{}, nil
}

// restampNodeClaims moves the class's NodeClaims that are not at the
// current hash version to it, with the class's current hash.
func (c *Controller) restampNodeClaims(ctx context.Context, nodeClass *awsv1.EC2NodeClass, hash string) error {
	list := &v1.NodeClaimList{}
	// No field index is assumed (the wiring may not register one); the
	// list comes from the manager's cache, so filtering here is cheap.
	if err := c.kube.List(ctx, list); err != nil {
		return fmt.Errorf("listing nodeclaims of ec2nodeclass %s: %w", nodeClass.Name, err)
	}
	for i := range list.Items {
		nc := &list.Items[i]
		ref := nc.Spec.NodeClassRef
		if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" || ref.Name != nodeClass.Name {
			continue
		}
		if nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion {
			continue
		}
		stored := nc.DeepCopy()
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		// A NodeClaim already drifted keeps its old hash: under the new
		// algorithm there is no telling whether it still differs, and
		// undoing a decided drift would be the surprise.
		if !meta.IsStatusConditionTrue(nc.GetConditions(), v1.ConditionTypeDrifted) {
			nc.Annotations[awsv1.AnnotationEC2NodeClassHash] = hash
		}
		nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
		if err := c.kube.Patch(ctx, nc, client.MergeFrom(stored)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("re-stamping nodeclaim %s: %w", nc.Name, err)
		}
	}
	return nil
}
