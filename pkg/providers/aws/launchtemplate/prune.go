package launchtemplate

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
)

// DefaultPruneInterval is the time between two prune passes: a template
// unused for the TTL is deleted within TTL plus this.
const DefaultPruneInterval = time.Minute

// Pruner is the leader-only loop that deletes the launch templates no
// launch uses any more. Its first pass hydrates the cache with the
// cluster's templates (those a previous leader made, or that outlived a
// restart), retried each pass until it succeeds; every pass prunes what
// went unused for the TTL. Templates of other clusters are never listed.
type Pruner struct {
	templates *Provider
	interval  time.Duration
	log       logr.Logger

	mu       sync.Mutex
	hydrated bool
}

// NewPruner returns the loop for p; interval 0 is DefaultPruneInterval.
func NewPruner(p *Provider, interval time.Duration, log logr.Logger) *Pruner {
	if interval <= 0 {
		interval = DefaultPruneInterval
	}
	return &Pruner{templates: p, interval: interval, log: log}
}

// Name is the loop's name in logs.
func (r *Pruner) Name() string { return "launchtemplate.garbagecollection" }

// Register adds the loop to mgr. A plain runnable needs leader election, so
// only the leader prunes: a standby's cache is not the launches'.
func (r *Pruner) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(r.Run))
}

// Run runs a pass at once and then every interval until ctx ends.
func (r *Pruner) Run(ctx context.Context) error {
	if r.log.GetSink() != nil {
		ctx = log.IntoContext(ctx, r.log)
	}
	return periodic.Loop{Interval: r.interval, Immediately: true, Pass: r.Pass, Log: r.log, Failure: "pruning launch templates"}.Run(ctx)
}

// Pass hydrates until that has succeeded once, then prunes. A failed
// hydration still prunes what this process cached itself.
func (r *Pruner) Pass(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var hydrateErr error
	if !r.hydrated {
		if hydrateErr = r.templates.Hydrate(ctx); hydrateErr == nil {
			r.hydrated = true
		}
	}
	_, err := r.templates.Prune(ctx)
	return errors.Join(hydrateErr, err)
}
