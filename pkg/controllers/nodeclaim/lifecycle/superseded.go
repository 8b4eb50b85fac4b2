package lifecycle

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// supersededTTL is how long a version this controller wrote over is
// remembered: far longer than the informer takes to deliver the write.
const supersededTTL = time.Minute

// staleRecheck is when a reconcile that read a superseded version looks
// again, should its write's event not have come by then.
const staleRecheck = 10 * time.Second

// superseded remembers the versions of NodeClaims this controller has
// itself written over. A reconcile that reads one of them reads a cache
// that has not caught up with our own write yet (a Node event, or the
// metadata patch's event, woke it between our writes and their watch
// events): it would compute the write it already made, and a patch locked
// on that version could only be refused with a 409. The write's own watch
// event reconciles the NodeClaim again, from the version it made.
type superseded struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	// at is when each uid/resourceVersion was written over.
	at     map[string]time.Time
	pruned time.Time
}

func newSuperseded(clk clock.PassiveClock) *superseded {
	return &superseded{clock: clk, at: map[string]time.Time{}}
}

// wrote records that the controller wrote nc over version from, producing
// version to; a write that changed nothing (the same version) supersedes
// nothing, and no event would come for it.
func (s *superseded) wrote(nc *v1.NodeClaim, from, to string) {
	if from == "" || from == to {
		return
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[string(nc.UID)+"/"+from] = now
	if now.Sub(s.pruned) > supersededTTL {
		s.pruned = now
		for k, at := range s.at {
			if now.Sub(at) > supersededTTL {
				delete(s.at, k)
			}
		}
	}
}

// stale says whether nc is a version the controller has written over.
func (s *superseded) stale(nc *v1.NodeClaim) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at[string(nc.UID)+"/"+nc.ResourceVersion]
	return ok && s.clock.Since(at) <= supersededTTL
}
