package cloudprovider

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultUnavailableTTL is how long an offering that ran out of capacity is
// avoided: long enough to stop the provisioner from retrying it in a loop,
// short enough that capacity coming back is used soon.
const DefaultUnavailableTTL = 3 * time.Minute

// UnavailableOfferings remembers offerings that recently failed with
// insufficient capacity. The launch step writes it; the provisioner (and a
// provider's GetInstanceTypes) read it through IsUnavailable so the next
// plan picks something else. It is safe for concurrent use.
type UnavailableOfferings struct {
	clock clock.Clock
	ttl   time.Duration

	mu      sync.RWMutex
	expires map[OfferingKey]time.Time
	seq     uint64
}

// NewUnavailableOfferings builds an empty cache; a nil clock means the real
// one and a zero ttl means DefaultUnavailableTTL.
func NewUnavailableOfferings(clk clock.Clock, ttl time.Duration) *UnavailableOfferings {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if ttl <= 0 {
		ttl = DefaultUnavailableTTL
	}
	return &UnavailableOfferings{clock: clk, ttl: ttl, expires: map[OfferingKey]time.Time{}}
}

// MarkUnavailable makes the offering unavailable for the TTL from now
// (extending an existing entry).
func (u *UnavailableOfferings) MarkUnavailable(key OfferingKey) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.expires[key] = u.clock.Now().Add(u.ttl)
	u.seq++
}

// IsUnavailable reports whether the offering failed within the TTL.
func (u *UnavailableOfferings) IsUnavailable(key OfferingKey) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	exp, ok := u.expires[key]
	return ok && u.clock.Now().Before(exp)
}

// Keys lists the offerings currently unavailable, sorted, and prunes
// expired entries.
func (u *UnavailableOfferings) Keys() []OfferingKey {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	out := make([]OfferingKey, 0, len(u.expires))
	for k, exp := range u.expires {
		if !now.Before(exp) {
			delete(u.expires, k)
			continue
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.CapacityType < b.CapacityType
	})
	return out
}

// SeqNum changes whenever an offering is marked, so readers can cache
// derived data (e.g. filtered instance types) until it moves.
func (u *UnavailableOfferings) SeqNum() uint64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.seq
}
