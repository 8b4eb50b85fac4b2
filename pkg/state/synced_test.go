package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// storeInformer is an informer with a store and nothing else; the cluster
// state's Synced only reads its store.
type storeInformer struct {
	cache.Informer
	store  toolscache.Store
	synced bool
}

func (s *storeInformer) GetStore() toolscache.Store { return s.store }
func (s *storeInformer) HasSynced() bool            { return s.synced }

type storeInformers map[string]*storeInformer

func (s storeInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	switch obj.(type) {
	case *v1.NodeClaim:
		return s["nodeclaims"], nil
	case *corev1.Node:
		return s["nodes"], nil
	}
	panic("unexpected kind")
}

// TestSyncedReadsTheInformersStores compares the cache with the informers'
// stores when it has them (objects the API server does not have show that
// the store, not a List, was read), and lists through the client while a
// store has not synced.
func TestSyncedReadsTheInformersStores(t *testing.T) {
	ctx := context.Background()
	stores := storeInformers{
		"nodeclaims": {store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), synced: true},
		"nodes":      {store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), synced: true},
	}
	c := state.NewCluster(clocktesting.NewFakeClock(time.Now()), cp.Client, state.Options{BatchMaxDuration: 10 * time.Second, Informers: stores})

	nc := nodeClaim("stored-nc", "default", "")
	n := node("stored-node", "", "kwok://stored-node", true)
	require.NoError(t, stores["nodeclaims"].store.Add(nc))
	require.NoError(t, stores["nodes"].store.Add(n))
	assert.False(t, c.Synced(ctx), "nothing in the cache")
	c.UpdateNodeClaim(nc)
	assert.False(t, c.Synced(ctx), "node missing")
	c.UpdateNode(n)
	assert.True(t, c.Synced(ctx))

	launched := nc.DeepCopy()
	launched.Status.ProviderID = "kwok://stored-nc"
	require.NoError(t, stores["nodeclaims"].store.Update(launched))
	assert.False(t, c.Synced(ctx), "launch in the store, not yet in the cache")
	c.UpdateNodeClaim(launched)
	assert.True(t, c.Synced(ctx))

	// A store that has not synced is not trusted: the client's List
	// (the API server here, which has none of these objects) is read.
	extra := node("only-in-api", "", "kwok://only-in-api", true)
	require.NoError(t, cp.Client.Create(ctx, extra))
	t.Cleanup(func() { _ = cp.Client.Delete(ctx, extra) })
	assert.True(t, c.Synced(ctx), "the node store does not have it")
	stores["nodes"].synced = false
	assert.False(t, c.Synced(ctx), "listed through the client")
}
