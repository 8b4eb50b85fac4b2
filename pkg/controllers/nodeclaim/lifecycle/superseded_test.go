package lifecycle_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			lagging := &laggingCache{Client: cp.Client}
			e.withClient(lagging)
			nc := e.nodeClaim()
			tc.setup(e, nc)
			stale := e.get(nc.Name)
			tc.step(e, nc)
			current := e.get(nc.Name)
			require.NotEqual(t, stale.ResourceVersion, current.ResourceVersion, "the step wrote")

			lagging.serve(stale)
			writes := lagging.writes
			e.reconcile(nc.Name)
			require.Equal(t, writes, lagging.writes, "no write from a version the controller wrote over")
			require.Zero(t, lagging.conflicts)
			require.Equal(t, current.ResourceVersion, e.get(nc.Name).ResourceVersion)

			lagging.serve(nil)
			e.reconcile(nc.Name)
			require.Zero(t, lagging.conflicts)
			requireCondition(t, e.get(nc.Name), v1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched")
		})
	}
}

// laggingCache serves a stale copy of one NodeClaim while told to, as an
// informer that has not delivered the latest event yet, and counts the
// NodeClaim writes and their conflicts.
type laggingCache struct {
	client.Client
	mu                sync.Mutex
	stale             *v1.NodeClaim
	writes, conflicts int
}

func (c *laggingCache) serve(nc *v1.NodeClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stale = nc
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	stale := c.stale
	c.mu.Unlock()
	if nc, ok := obj.(*v1.NodeClaim); ok && stale != nil && key.Name == stale.Name {
		stale.DeepCopyInto(nc)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *laggingCache) count(obj client.Object, err error) error {
	if _, ok := obj.(*v1.NodeClaim); ok {
		c.mu.Lock()
		c.writes++
		if apierrors.IsConflict(err) {
			c.conflicts++
		}
		c.mu.Unlock()
	}
	return err
}

func (c *laggingCache) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.count(obj, c.Client.Patch(ctx, obj, patch, opts...))
}

func (c *laggingCache) Status() client.SubResourceWriter {
	return &laggingStatus{SubResourceWriter: c.Client.Status(), parent: c}
}

type laggingStatus struct {
	client.SubResourceWriter
	parent *laggingCache
}

func (w *laggingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return w.parent.count(obj, w.SubResourceWriter.Patch(ctx, obj, patch, opts...))
}
