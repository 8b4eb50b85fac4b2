// Package staticpool holds what the static NodePool controllers (provisioning
// scales a pool up to spec.replicas, deprovisioning scales it down) both
// need to watch their pools: the mapping from a NodeClaim to its pool's
// request and the replicas value compared on a NodePool update.
package staticpool

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
