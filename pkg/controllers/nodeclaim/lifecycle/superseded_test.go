package lifecycle_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
)

// TestStaleReadDoesNotRewrite: a reconcile woken before the cache has seen
// the controller's own last write (a Node event between the write and its
// watch event) reads a version the controller wrote over. It writes
// nothing: the same write again, locked on that version, could only be
// refused with a 409. The next reconcile, from the current version,
// carries on.
func TestStaleReadDoesNotRewrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stale is the version the cache still serves, taken after
		// setup and before the step the controller's write made.
		setup, step func(e *env, nc *v1.NodeClaim)
	}{
		{"the finalizer and launch", func(*env, *v1.NodeClaim) {}, func(e *env, nc *v1.NodeClaim) { e.reconcile(nc.Name) }},
		{"registration", func(e *env, nc *v1.NodeClaim) { e.reconcile(nc.Name) }, func(e *env, nc *v1.NodeClaim) {
			e.kubeletNode(e.get(nc.Name))
			e.reconcile(nc.Name)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			lagging := lagCache(e)
			nc := e.nodeClaim()
			tc.setup(e, nc)
			stale := e.get(nc.Name)
			tc.step(e, nc)
			current := e.get(nc.Name)
			require.NotEqual(t, stale.ResourceVersion, current.ResourceVersion, "the step wrote")

			lagging.serve(stale)
			before, _, _ := lagging.writes.counts()
			e.reconcile(nc.Name)
			writes, conflicts, _ := lagging.writes.counts()
			require.Equal(t, before, writes, "no write from a version the controller wrote over")
			require.Zero(t, conflicts)
			require.Equal(t, current.ResourceVersion, e.get(nc.Name).ResourceVersion)

			lagging.serve(nil)
			e.reconcile(nc.Name)
			_, conflicts, _ = lagging.writes.counts()
			require.Zero(t, conflicts)
			requireCondition(t, e.get(nc.Name), v1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched")
		})
	}
}

// laggingCache serves a stale copy of one NodeClaim while told to, as an
// informer that has not delivered the latest event yet, and tallies the
// NodeClaim writes (metadata and status patches).
type laggingCache struct {
	mu     sync.Mutex
	stale  *v1.NodeClaim
	writes tally
}

func lagCache(e *env) *laggingCache {
	l := &laggingCache{}
	e.intercept(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			l.mu.Lock()
			stale := l.stale
			l.mu.Unlock()
			if nc, ok := obj.(*v1.NodeClaim); ok && stale != nil && key.Name == stale.Name {
				stale.DeepCopyInto(nc)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return l.count(obj, c.Patch(ctx, obj, patch, opts...))
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return l.count(obj, c.SubResource(sub).Patch(ctx, obj, patch, opts...))
		},
	})
	return l
}

func (l *laggingCache) serve(nc *v1.NodeClaim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stale = nc
}

func (l *laggingCache) count(obj client.Object, err error) error {
	if _, ok := obj.(*v1.NodeClaim); ok {
		return l.writes.add(err)
	}
	return err
}
