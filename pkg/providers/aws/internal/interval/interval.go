// Package interval is the refresh gate behind the AWS providers' Tick
// methods (pricing, instance types): callers may tick from a loop as often
// as they like, and the refresh runs on the first tick and then at most
// once an interval. A tick whose refresh failed is retried sooner when the
// caller says when (RetryAt), so data that could not be fetched at start
// (a Pricing API outage) is not left to the static fallback for a whole
// interval.
package interval

import (
	"sync"
	"time"
)

// Gate remembers the last tick that was due. The zero value is ready to
// use and due at once; it is safe for concurrent use.
type Gate struct {
	mu   sync.Mutex
	last time.Time
	// retry, when set, makes a tick due at that time even within the
	// interval.
	retry time.Time
}

// Due reports whether every has passed since the last due tick (or no tick
// was due yet, or a retry time set by RetryAt has come), and if so records
// now as that tick.
func (g *Gate) Due(now time.Time, every time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	retry := !g.retry.IsZero() && !now.Before(g.retry)
	if !retry && !g.last.IsZero() && now.Sub(g.last) < every {
		return false
	}
	g.last, g.retry = now, time.Time{}
	return true
}

// RetryAt makes a tick due at t at the latest: the refresh of the last due
// tick failed.
func (g *Gate) RetryAt(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.retry = t
}
