// Package staticpool holds what the static NodePool controllers (provisioning
// scales a pool up to spec.replicas, deprovisioning scales it down) both
// need to watch their pools: the controller's watches, the mapping from a
// NodeClaim to its pool's request and the replicas value compared on a
// NodePool update.
package staticpool

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// PoolOf maps a NodeClaim (or any object with the NodePool label) to a
// request for its NodePool, so a NodeClaim event re-counts its pool.
func PoolOf(_ context.Context, o client.Object) []reconcile.Request {
	if pool := o.GetLabels()[v1.NodePoolLabelKey]; pool != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pool}}}
	}
	return nil
}

// Replicas is the pool's spec.replicas, -1 for a dynamic pool, so that an
// update predicate sees a change between static and dynamic too.
func Replicas(np *v1.NodePool) int64 {
	if np.Spec.Replicas == nil {
		return -1
	}
	return *np.Spec.Replicas
}

// ClaimEvents selects the NodeClaim events that re-count a pool: Create,
// Update (given the old and the new NodeClaim) and Delete.
type ClaimEvents struct {
	Create, Delete bool
	Update         func(before, after client.Object) bool
}

// Register adds a static-pool controller named name to mgr: r reconciles a
// NodePool when it is created, on an update poolChanged reports, and on
// the NodeClaim events claims selects for the NodeClaim's pool.
func Register(mgr manager.Manager, name string, r reconcile.Reconciler, poolChanged func(before, after *v1.NodePool) bool, claims ClaimEvents) error {
	return builder.ControllerManagedBy(mgr).
		Named(name).
		For(&v1.NodePool{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return true },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return poolChanged(e.ObjectOld.(*v1.NodePool), e.ObjectNew.(*v1.NodePool))
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(PoolOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return claims.Create },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return claims.Update != nil && claims.Update(e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return claims.Delete },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
		Complete(r)
}
