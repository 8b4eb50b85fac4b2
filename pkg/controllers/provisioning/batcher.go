package provisioning

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Batching defaults (BATCH_IDLE_DURATION, BATCH_MAX_DURATION).
const (
	DefaultBatchIdleDuration = time.Second
	DefaultBatchMaxDuration  = 10 * time.Second
	// firstTriggerTimeout bounds how long Wait waits for a window to open, so
	// that the provisioning loop can notice shutdown and resync.
	firstTriggerTimeout = time.Second
)

// Batcher gathers triggers into windows so that one scheduling round sees a
// whole burst of pending pods (a Deployment scaling up) instead of a round
// per pod. A window opens with the first trigger and closes after
// IdleDuration without a new trigger or MaxDuration after it opened,
// whichever comes first. Re-triggering a UID already in the window does not
// extend it: pods are re-triggered periodically while they stay pending,
// and that must not keep a window open forever.
//
// Deadlines are computed from the clock inside Trigger, not in the waiting
// goroutine, so the timing is exact under a fake clock.
type Batcher struct {
	clock        clock.Clock
	idleDuration time.Duration
	maxDuration  time.Duration

	mu     sync.Mutex
	open   bool
	start  time.Time // window opened
	last   time.Time // last new trigger
	seen   map[types.UID]struct{}
	notify chan struct{} // capacity 1: "something changed"
}

// NewBatcher returns a batcher with the given window durations (the defaults
// when zero).
func NewBatcher(clk clock.Clock, idle, max time.Duration) *Batcher {
	if idle <= 0 {
		idle = DefaultBatchIdleDuration
	}
	if max <= 0 {
		max = DefaultBatchMaxDuration
	}
	return &Batcher{clock: clk, idleDuration: idle, maxDuration: max,
		seen: map[types.UID]struct{}{}, notify: make(chan struct{}, 1)}
}

// Trigger adds uid to the current window, opening one if needed. An empty
// UID (a trigger not tied to a pod) always counts as new.
func (b *Batcher) Trigger(uid types.UID) {
	b.mu.Lock()
	if uid != "" {
		if _, dup := b.seen[uid]; dup {
			b.mu.Unlock()
			return
		}
		b.seen[uid] = struct{}{}
	}
	now := b.clock.Now()
	if !b.open {
		b.open, b.start = true, now
	}
	b.last = now
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// Wait blocks until a window closes and returns true, or returns false when
// no window opened within a second or ctx ended. It uses a single timer at a
// time and re-derives the deadline on every wake-up, so a late wake-up is
// never wrong, only late.
func (b *Batcher) Wait(ctx context.Context) bool {
	giveUp := b.clock.Now().Add(firstTriggerTimeout)
	for {
		now := b.clock.Now()
		b.mu.Lock()
		var deadline time.Time
		if b.open {
			deadline = b.last.Add(b.idleDuration)
			if end := b.start.Add(b.maxDuration); end.Before(deadline) {
				deadline = end
			}
			if !now.Before(deadline) {
				b.open = false
				b.seen = map[types.UID]struct{}{}
				b.mu.Unlock()
				return true
			}
		} else {
			if !now.Before(giveUp) {
				b.mu.Unlock()
				return false
			}
			deadline = giveUp
		}
		b.mu.Unlock()

		timer := b.clock.NewTimer(deadline.Sub(now))
		select {
		case <-timer.C():
		case <-b.notify:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return false
		}
	}
}
