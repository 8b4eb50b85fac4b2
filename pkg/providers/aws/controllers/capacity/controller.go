// Package capacity is upstream's discovered-capacity controller: when a
// node Karpenter launched registers, its real memory capacity becomes the
// capacity of its instance type for its EC2NodeClass (and that class's AMIs)
// in the instance-type provider, in place of the VM_MEMORY_OVERHEAD_PERCENT
// estimate, so later launches of the type are packed against what the
// machine really offers.
package capacity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// Recorder stores a node's capacity (instancetypes.Provider).
type Recorder interface {
	RecordCapacity(ctx context.Context, node *corev1.Node, imageID string, nodeClass *awsv1.EC2NodeClass) bool
}

// Controller feeds registered nodes' capacity to the provider.
type Controller struct {
	kube  client.Client
	store Recorder
}

// NewController returns the controller.
func NewController(kube client.Client, store Recorder) *Controller {
	return &Controller{kube: kube, store: store}
}

// Name is the controller's name in logs and metrics.
func (c *Controller) Name() string { return "providers.instancetype.capacity" }

// Register watches Nodes: those already registered when the cache fills
// (which hydrates the store after a restart) and those that just
// registered.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	registered := func(o client.Object) bool { return o.GetLabels()[v1.NodeRegisteredLabelKey] == "true" }
	return builder.ControllerManagedBy(mgr).
		Named(c.Name()).
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return registered(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !registered(e.ObjectOld) && registered(e.ObjectNew)
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(c)
}

// Reconcile records one node's capacity.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.Labels[v1.NodePoolLabelKey] == "" || node.Spec.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing nodeclaims: %w", err)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.ProviderID != node.Spec.ProviderID {
			continue
		}
		ref := nc.Spec.NodeClassRef
		if ref == nil || ref.Group != awsv1.Group {
			return reconcile.Result{}, nil
		}
		class := &awsv1.EC2NodeClass{}
		if err := c.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, class); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("getting EC2NodeClass %s: %w", ref.Name, err))
		}
		c.store.RecordCapacity(ctx, node, nc.Status.ImageID, class)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, nil
}
