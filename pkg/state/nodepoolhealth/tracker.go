// Package nodepoolhealth remembers, per NodePool, how its last few node
// launches ended: registered, or given up on (never launched, never
// registered). The NodeClaim lifecycle records outcomes; the NodePool
// registration-health controller turns them into the pool's
// NodeRegistrationHealthy condition.
package nodepoolhealth

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// BufferSize is how many recent outcomes are kept per NodePool (upstream's).
const BufferSize = 4

// ReasonRegistrationFailed is the failure reason of a node that launched but
// never registered.
const ReasonRegistrationFailed = "RegistrationFailed"

// Generation identifies the configuration outcomes were observed under: a
// change of the NodePool's or its NodeClass's generation starts afresh.
type Generation struct {
	NodePool, NodeClass int64
}

// Status is a pool's verdict.
type Status struct {
	// Known is false while no outcome has been recorded.
	Known bool
	// Healthy is true while fewer than half of the recorded outcomes are
	// failures.
	Healthy bool
	// Reason is the most recent failure's reason.
	Reason string
	// Failures and Observed count the buffer's failures and entries.
	Failures, Observed int
}

type outcome struct {
	ok     bool
	reason string
}

type pool struct {
	ring       [BufferSize]outcome
	n, next    int
	generation *Generation
}

// Tracker is safe for concurrent use; a nil Tracker records nothing.
type Tracker struct {
	mu     sync.Mutex
	pools  map[string]*pool
	notify chan event.GenericEvent
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{pools: map[string]*pool{}, notify: make(chan event.GenericEvent, 1024)}
}

// Observe records one outcome for the NodePool: ok for a node that
// registered, otherwise the reason it failed.
func (t *Tracker) Observe(nodePool string, ok bool, reason string) {
	if t == nil || nodePool == "" {
		return
	}
	t.mu.Lock()
	p := t.poolLocked(nodePool)
	p.ring[p.next] = outcome{ok: ok, reason: reason}
	p.next = (p.next + 1) % BufferSize
	if p.n < BufferSize {
		p.n++
	}
	t.mu.Unlock()
	// Wake the controller; if it is behind, its periodic resync catches up.
	select {
	case t.notify <- event.GenericEvent{Object: &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: nodePool}}}:
	default:
	}
}

func (t *Tracker) poolLocked(name string) *pool {
	p, ok := t.pools[name]
	if !ok {
		p = &pool{}
		t.pools[name] = p
	}
	return p
}

// Status returns the pool's verdict.
func (t *Tracker) Status(nodePool string) Status {
	if t == nil {
		return Status{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pools[nodePool]
	if !ok || p.n == 0 {
		return Status{}
	}
	s := Status{Known: true, Observed: p.n}
	// Walk from the oldest entry so Reason ends as the newest failure's.
	for i := 0; i < p.n; i++ {
		o := p.ring[(p.next-p.n+i+BufferSize)%BufferSize]
		if !o.ok {
			s.Failures++
			s.Reason = o.reason
		}
	}
	s.Healthy = 2*s.Failures < s.Observed
	return s
}

// SetGeneration tells the tracker which configuration the pool now has. It
// reports true when that differs from the one recorded before, in which case
// the outcomes are dropped. The first call for a pool adopts the generation
// and keeps what was observed before it.
func (t *Tracker) SetGeneration(nodePool string, g Generation) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.poolLocked(nodePool)
	if p.generation == nil {
		p.generation = &g
		return false
	}
	if *p.generation == g {
		return false
	}
	*p = pool{generation: &g}
	return true
}

// Forget drops a deleted NodePool.
func (t *Tracker) Forget(nodePool string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pools, nodePool)
}

// Events delivers the name of a NodePool (as a NodePool object) each time
// an outcome is recorded for it, for a controller-runtime channel source.
func (t *Tracker) Events() <-chan event.GenericEvent { return t.notify }
