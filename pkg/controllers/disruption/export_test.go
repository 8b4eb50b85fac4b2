package disruption

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PassResult is passResult for the external tests.
type PassResult struct{ Started, Abandoned bool }

// ReconcilePass runs one pass of c and says what it did.
func ReconcilePass(ctx context.Context, c *Controller) (PassResult, error) {
	r, err := c.reconcile(ctx)
	return PassResult{Started: r.started, Abandoned: r.abandoned}, err
}

// NextPass is how long c's loop waits after a pass that did r.
func NextPass(c *Controller, r PassResult, err error) time.Duration {
	return c.nextPass(passResult{started: r.Started, abandoned: r.Abandoned}, err)
}

// SetDisruptionReason is setDisruptionReason for the external tests.
func SetDisruptionReason(ctx context.Context, kube client.Client, name, reason string) error {
	return setDisruptionReason(ctx, kube, name, reason)
}

// SetTaint is setTaint for the external tests.
func SetTaint(ctx context.Context, kube client.Client, name string, taint corev1.Taint, on bool) error {
	return setTaint(ctx, kube, name, taint, on)
}
