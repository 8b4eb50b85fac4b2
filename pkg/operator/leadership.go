package operator

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/runtime"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// MaxLeadershipHold bounds how long HoldLeadership keeps a replica from
// campaigning: a provider that cannot load (its API unreachable) must not
// leave the cluster without a leader, whose other controllers (termination,
// garbage collection) need no provider caches.
const MaxLeadershipHold = time.Minute

// defaultRenewDeadline is controller-runtime's, which the lock's client
// timeout derives from when the options leave it unset.
const defaultRenewDeadline = 10 * time.Second

// leadershipGate holds the campaign for the lease until every hold is
// released or MaxLeadershipHold has passed since the first wait.
type leadershipGate struct {
	mu    sync.Mutex
	holds []<-chan struct{}
	open  bool
	max   time.Duration
}

func (g *leadershipGate) add(ready <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holds = append(g.holds, ready)
}

// wait returns once every hold is released, max has passed, or ctx ends.
// Once it has returned for a release or the bound, it returns at once.
func (g *leadershipGate) wait(ctx context.Context) {
	g.mu.Lock()
	if g.open {
		g.mu.Unlock()
		return
	}
	holds := append([]<-chan struct{}(nil), g.holds...)
	g.mu.Unlock()
	timeout := time.NewTimer(g.max)
	defer timeout.Stop()
	for _, h := range holds {
		select {
		case <-h:
		case <-timeout.C:
			g.release()
			return
		case <-ctx.Done():
			return
		}
	}
	g.release()
}

func (g *leadershipGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
}

// gatedLock is the lease lock with the gate before its first read: a
// replica that is not ready to lead does not even look at the lease, so it
// neither takes a free lease nor one whose holder died. Waiting before Get
// rather than before Create or Update keeps the record the elector writes
// fresh (its renew time is taken after the read). Renewals find the gate
// open.
type gatedLock struct {
	resourcelock.Interface
	gate *leadershipGate
}

func (l *gatedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.gate.wait(ctx)
	return l.Interface.Get(ctx)
}

// lateRecorder forwards the lock's events to the manager's recorder, which
// exists only once the manager does (the lock is built before it).
type lateRecorder struct {
	mu sync.Mutex
	r  record.EventRecorder
}

func (l *lateRecorder) set(r record.EventRecorder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r = r
}

func (l *lateRecorder) Eventf(obj runtime.Object, eventType, reason, message string, args ...interface{}) {
	l.mu.Lock()
	r := l.r
	l.mu.Unlock()
	if r != nil {
		r.Eventf(obj, eventType, reason, message, args...)
	}
}

// newLeaseLock builds the Lease lock as controller-runtime would (identity
// hostname_uuid, its own user agent, a client timeout of half the renew
// deadline), wrapped in gate.
func newLeaseLock(cfg *rest.Config, namespace, name string, renewDeadline time.Duration, gate *leadershipGate, recorder *lateRecorder) (resourcelock.Interface, string, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, "", fmt.Errorf("leader election identity: %w", err)
	}
	id := host + "_" + uuid.NewString()
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	if renewDeadline <= 0 {
		renewDeadline = defaultRenewDeadline
	}
	// One hung request must not cost the lease.
	cfg.Timeout = max(renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("leader election client: %w", err)
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("leader election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, core, coordination,
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
	if err != nil {
		return nil, "", fmt.Errorf("leader election lock: %w", err)
	}
	return &gatedLock{Interface: lock, gate: gate}, id, nil
}

// HoldLeadership keeps this replica from campaigning for the lease until
// ready is closed (at most MaxLeadershipHold): a provider passes the
// channel it closes once its caches are loaded, so the replica that leads
// has them, and a standby still loading leaves the lease to a warm one.
// The manager, its caches and every runnable that does not need the lease
// start as usual meanwhile. Call it before Start; it does nothing with
// leader election disabled.
func (o *Operator) HoldLeadership(ready <-chan struct{}) {
	if o.gate != nil {
		o.gate.add(ready)
	}
}
