package disruption

import (
	"context"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// consolidation marks a NodeClaim Consolidatable once its pool's
// consolidateAfter has passed since the last pod event on it. Removing the
// condition again when pods come or go is what makes consolidateAfter a
// quiet period rather than a minimum age.
type consolidation struct {
	clock clock.Clock
}

func (c *consolidation) reconcile(ctx context.Context, np *v1.NodePool, nc *v1.NodeClaim) (reconcile.Result, error) {
	after := np.Spec.Disruption.ConsolidateAfter.Duration
	// consolidateAfter: Never turns consolidation, emptiness included, off.
	if after == nil {
		if nc.RemoveCondition(v1.ConditionTypeConsolidatable) {
			log.FromContext(ctx).V(1).Info("removing consolidatable status condition, consolidation is disabled")
		}
		return reconcile.Result{}, nil
	}
	initialized := nc.Condition(v1.ConditionTypeInitialized)
	if initialized == nil || initialized.Status != "True" {
		if nc.RemoveCondition(v1.ConditionTypeConsolidatable) {
			log.FromContext(ctx).V(1).Info("removing consolidatable status condition, isn't initialized")
		}
		return reconcile.Result{}, nil
	}
	// Without a pod event yet, count from initialization: that is when pods
	// could first be scheduled to the node.
	since := initialized.LastTransitionTime.Time
	if !nc.Status.LastPodEventTime.IsZero() {
		since = nc.Status.LastPodEventTime.Time
	}
	now := c.clock.Now()
	if now.Sub(since) < *after {
		if nc.RemoveCondition(v1.ConditionTypeConsolidatable) {
			log.FromContext(ctx).V(1).Info("removing consolidatable status condition")
		}
		return reconcile.Result{RequeueAfter: since.Add(*after).Sub(now)}, nil
	}
	had := nc.Condition(v1.ConditionTypeConsolidatable) != nil
	setTrue(nc, now, v1.ConditionTypeConsolidatable, "", "")
	if !had {
		log.FromContext(ctx).V(1).Info("marking consolidatable")
	}
	return reconcile.Result{}, nil
}
