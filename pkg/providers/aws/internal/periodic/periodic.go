// Package periodic owns the loop of controllers that work on a timer rather
// than on watch events: a pass every interval until the context ends, a
// failed pass logged and retried next time, and a panic recovered with its
// stack so that one bad answer never stops the loop or the process.
package periodic

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
)

// Loop is one periodic pass and how it is run.
type Loop struct {
	// Interval is the time between passes.
	Interval time.Duration
	// Immediately runs a pass at start instead of after the first
	// interval.
	Immediately bool
	// Pass does one round of work.
	Pass func(ctx context.Context) error
	// Log receives failed passes with Failure as the message.
	Log     logr.Logger
	Failure string
}

// Run runs passes until ctx ends; it always returns nil, as a manager
// runnable whose end is the manager's.
func (l Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.Interval)
	defer t.Stop()
	if l.Immediately {
		l.once(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			l.once(ctx)
		}
	}
}

func (l Loop) once(ctx context.Context) {
	if err := Safe(ctx, l.Pass); err != nil && ctx.Err() == nil {
		l.Log.Error(err, l.Failure)
	}
}

// Safe runs pass and returns a panic as an error carrying its stack.
func Safe(ctx context.Context, pass func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return pass(ctx)
}
