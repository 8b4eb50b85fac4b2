// Package ttl is the small expiring map the AWS resolvers cache EC2, SSM and
// IAM answers in, so a reconcile every few seconds does not become an API
// call every few seconds. It is safe for concurrent use: one mutex guards
// the map.
package ttl

import (
	"sync"
	"time"
)

// Cache maps keys to values that expire after a per-entry duration.
type Cache[V any] struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]entry[V]
}

type entry[V any] struct {
	value   V
	expires time.Time
}

// New returns an empty cache; now is the clock (time.Now when nil).
func New[V any](now func() time.Time) *Cache[V] {
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{now: now, entries: map[string]entry[V]{}}
}

// Get returns the live value under key.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		delete(c.entries, key)
		var zero V
		return zero, false
	}
	return e.value, true
}

// Set stores value under key for d.
func (c *Cache[V]) Set(key string, value V, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[key] = entry[V]{value: value, expires: c.now().Add(d)}
}

// Delete forgets key.
func (c *Cache[V]) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}

// Flush forgets everything.
func (c *Cache[V]) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]entry[V]{}
}
