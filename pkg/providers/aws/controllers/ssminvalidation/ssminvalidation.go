// Package ssminvalidation owns the periodic check that drops cached "latest"
// AMI alias parameters whose image has been deprecated, as upstream's SSM
// invalidation controller: the parameters are cached for a day, so without
// it a class keeps resolving a deprecated image until the cache expires.
// When anything was forgotten it asks the EC2NodeClass controller to
// reconcile every class at once, so the new release reaches status (and
// AMI drift) within one interval.
package ssminvalidation

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
)

// DefaultInterval is upstream's period.
const DefaultInterval = 30 * time.Minute

// Parameters forgets the cached parameters whose image is deprecated and
// names them (amifamily.Provider).
type Parameters interface {
	InvalidateDeprecated(ctx context.Context) ([]string, error)
}

// Resyncer reconciles every EC2NodeClass now (nodeclass.Controller).
type Resyncer interface {
	Resync(ctx context.Context) error
}

// Controller runs the check every Interval.
type Controller struct {
	params   Parameters
	classes  Resyncer
	interval time.Duration
	log      logr.Logger
}

// New returns the controller; interval ≤ 0 means DefaultInterval.
func New(params Parameters, classes Resyncer, interval time.Duration, log logr.Logger) *Controller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Controller{params: params, classes: classes, interval: interval, log: log}
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "providers.ssm.invalidation" }

// Register adds the loop to mgr; it runs on the leader only.
func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(c.run))
}

func (c *Controller) run(ctx context.Context) error {
	// No pass at start: nothing is cached before the first resolutions.
	return periodic.Loop{Interval: c.interval, Pass: c.Check, Log: c.log, Failure: "invalidating cached ssm parameters"}.Run(ctx)
}

// Check runs one pass.
func (c *Controller) Check(ctx context.Context) error {
	forgotten, err := c.params.InvalidateDeprecated(ctx)
	if err != nil {
		return err
	}
	if len(forgotten) == 0 {
		return nil
	}
	c.log.Info("invalidated cached ssm parameters whose image is deprecated", "parameters", forgotten)
	if c.classes == nil {
		return nil
	}
	return c.classes.Resync(ctx)
}
