package lifecycle

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/state/nodepoolhealth"
)

// Reasons recorded when liveness gives up on a NodeClaim.
const (
	launchTimeoutReason       = "launch_timeout"
	registrationTimeoutReason = "registration_timeout"
)

// liveness deletes NodeClaims that will not make it: never launched within
// LaunchTimeout, or launched but not registered within RegistrationTTL. Both
// clocks run from the condition's last transition, i.e. from when it was
// first set Unknown, so retries with new reasons do not reset them. The
// provisioner then plans a replacement for the pods.
func (c *Controller) liveness(ctx context.Context, nc *v1.NodeClaim, _ *pass) (reconcile.Result, bool, error) {
	registered := nc.Condition(v1.ConditionTypeRegistered)
	if registered == nil || nc.IsTrue(v1.ConditionTypeRegistered) {
		return reconcile.Result{}, false, nil
	}
	now := c.opts.Clock.Now()
	if launched := nc.Condition(v1.ConditionTypeLaunched); launched != nil && !nc.IsTrue(v1.ConditionTypeLaunched) {
		left := c.opts.LaunchTimeout - now.Sub(launched.LastTransitionTime.Time)
		if left > 0 {
			return reconcile.Result{RequeueAfter: left}, false, nil
		}
		return c.deleteForTimeout(ctx, nc, c.opts.LaunchTimeout, launchTimeoutReason, launched.Reason)
	}
	left := c.opts.RegistrationTTL - now.Sub(registered.LastTransitionTime.Time)
	if left > 0 {
		return reconcile.Result{RequeueAfter: left}, false, nil
	}
	return c.deleteForTimeout(ctx, nc, c.opts.RegistrationTTL, registrationTimeoutReason, nodepoolhealth.ReasonRegistrationFailed)
}

// deleteForTimeout gives up on the NodeClaim and counts it as a failure of
// its NodePool, with healthReason (the Launched reason for a launch that
// never succeeded) as the pool's NodeRegistrationHealthy reason.
func (c *Controller) deleteForTimeout(ctx context.Context, nc *v1.NodeClaim, ttl time.Duration, reason, healthReason string) (reconcile.Result, bool, error) {
	if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, false, fmt.Errorf("deleting nodeclaim after %s: %w", reason, err)
	}
	c.opts.Health.Observe(nc.Labels[v1.NodePoolLabelKey], false, healthReason)
	log.FromContext(ctx).Info("terminating due to timeout", "timeout", ttl, "reason", reason)
	return reconcile.Result{}, true, nil
}
