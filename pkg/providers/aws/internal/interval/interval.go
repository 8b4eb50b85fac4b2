// Package interval is the refresh gate behind the AWS providers' Tick
// methods (pricing, instance types): callers may tick from a loop as often
// as they like, and the refresh runs on the first tick and then at most
// once an interval. A tick that ran counts even if its refresh failed, so
// a failing API is retried after the interval rather than on every tick.
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
}

// Due reports whether every has passed since the last due tick (or no tick
// was due yet), and if so records now as that tick.
func (g *Gate) Due(now time.Time, every time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() && now.Sub(g.last) < every {
		return false
	}
	g.last = now
	return true
}
