package snapshot_test

import (
	"context"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// TestLiveReadsTheCacheWithoutCopying checks that Live over the manager's
// informer cache hands Build the cache's pods and reads the nodes without
// copying them: Build only reads them, and the disruption simulator builds
// a snapshot per candidate, so copies of every pod and Node each time were
// most of the controller's garbage.
func TestLiveReadsTheCacheWithoutCopying(t *testing.T) {
	cleanup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cache.New(cp.Config, cache.Options{Scheme: cp.Client.Scheme()})
	require.NoError(t, err)
	go func() { _ = c.Start(ctx) }()
	const n = 40
	for i := range n {
		name := "cached-" + strconv.Itoa(i)
		pod(t, name, "", nil)
		require.NoError(t, cp.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{v1.NodePoolLabelKey: "general"}}}))
	}
	live := snapshot.Live{Reader: c, Cloud: fakeCloud{}, Cluster: &fakeCluster{}}
	require.Eventually(t, func() bool {
		pods, err := live.Pods(ctx)
		nodes := &corev1.NodeList{}
		return err == nil && len(pods) == n && c.List(ctx, nodes) == nil && len(nodes.Items) == n
	}, 20*time.Second, 50*time.Millisecond)

	pods, err := live.Pods(ctx)
	require.NoError(t, err)
	for _, p := range pods {
		cached := &corev1.Pod{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), cached, client.UnsafeDisableDeepCopy))
		assert.Equal(t, reflect.ValueOf(cached.Spec.Containers).Pointer(), reflect.ValueOf(p.Spec.Containers).Pointer(),
			"pod %s is the cache's, not a copy", p.Name)
	}

	// A copied Node is a dozen allocations or more.
	allocs := testing.AllocsPerRun(10, func() { _, _ = live.LeavingNodes(ctx) })
	assert.Less(t, allocs, float64(n), "allocations of one LeavingNodes over %d nodes", n)

	// Through the informer's store: the cached pods themselves, without an
	// array of every pod's struct per call (a few allocations, not one per
	// pod: the List above copies each pod's struct into its Items).
	stored := snapshot.Live{Reader: c, Informers: c, Cloud: fakeCloud{}, Cluster: &fakeCluster{}}
	pods, err = stored.Pods(ctx)
	require.NoError(t, err)
	assert.Len(t, pods, n)
	for _, p := range pods {
		cached := &corev1.Pod{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), cached, client.UnsafeDisableDeepCopy))
		assert.Equal(t, reflect.ValueOf(cached.Spec.Containers).Pointer(), reflect.ValueOf(p.Spec.Containers).Pointer())
	}
	bytes := func(l snapshot.Live) float64 {
		const runs = 20
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			_, _ = l.Pods(ctx)
		}
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / runs
	}
	listed, fromStore := bytes(live), bytes(stored)
	t.Logf("bytes per Pods over %d pods: listed %.0f, from the store %.0f", n, listed, fromStore)
	assert.Less(t, fromStore, float64(n*256), "bytes per Pods from the store over %d pods", n)
}
