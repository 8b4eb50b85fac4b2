package snapshot_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/snapshot"
)

// countingView counts the reads that reach a view, and fails the next
// Pods call when failPods is set.
type countingView struct {
	snapshot.View
	reads    map[string]int
	failPods bool
}

func (c *countingView) Synced(ctx context.Context) bool {
	c.reads["Synced"]++
	return c.View.Synced(ctx)
}

func (c *countingView) SchedulingNodes() []*scheduling.ExistingNode {
	c.reads["SchedulingNodes"]++
	return c.View.SchedulingNodes()
}

func (c *countingView) LeavingNodes(ctx context.Context) (map[string]bool, error) {
	c.reads["LeavingNodes"]++
	return c.View.LeavingNodes(ctx)
}

func (c *countingView) Pods(ctx context.Context) ([]*corev1.Pod, error) {
	c.reads["Pods"]++
	if c.failPods {
		c.failPods = false
		return nil, errors.New("cache not started")
	}
	return c.View.Pods(ctx)
}

func (c *countingView) NodePools(ctx context.Context) ([]*v1.NodePool, error) {
	c.reads["NodePools"]++
	return c.View.NodePools(ctx)
}

func (c *countingView) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	c.reads["GetInstanceTypes"]++
	return c.View.GetInstanceTypes(ctx, np)
}

func (c *countingView) DaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	c.reads["DaemonSets"]++
	return c.View.DaemonSets(ctx)
}

func (c *countingView) Namespaces(ctx context.Context) ([]*corev1.Namespace, error) {
	c.reads["Namespaces"]++
	return c.View.Namespaces(ctx)
}

func TestMemoReadsTheViewOnce(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "general", true, nil)
	cluster := &fakeCluster{nodes: []*scheduling.ExistingNode{node(t, "candidate"), node(t, "keeper"),
		node(t, "draining", v1.DisruptedNoScheduleTaint)}}
	pod(t, "web", "candidate", nil)
	pod(t, "stays", "keeper", nil)
	pod(t, "evictee", "draining", nil)
	pod(t, "pending", "", nil)
	live := snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: cluster}
	counted := &countingView{View: live, reads: map[string]int{}}
	memo := snapshot.Memo(counted)

	// The same requests through the memo and straight from the view build
	// the same snapshots, in either order: what one simulation removes
	// does not stay removed for the next.
	requests := []snapshot.Request{
		{Remove: map[string]bool{"candidate": true}},
		{},
		{Remove: map[string]bool{"keeper": true}, NoPending: true},
		{Remove: map[string]bool{"candidate": true}},
	}
	for i, req := range requests {
		want, err := snapshot.Build(ctx, live, req)
		require.NoError(t, err)
		got, err := snapshot.Build(ctx, memo, req)
		require.NoError(t, err, "request %d", i)
		assert.ElementsMatch(t, nodeNames(want.Input.Nodes), nodeNames(got.Input.Nodes), "request %d: nodes", i)
		assert.ElementsMatch(t, names(want.Input.Pods), names(got.Input.Pods), "request %d: pods", i)
		assert.ElementsMatch(t, names(want.Moved), names(got.Moved), "request %d: moved pods", i)
		require.Len(t, got.Input.NodePools, 1, "request %d", i)
		assert.Equal(t, want.Input.NodePools[0].InstanceTypes, got.Input.NodePools[0].InstanceTypes, "request %d", i)
	}
	for _, kind := range []string{"Synced", "SchedulingNodes", "LeavingNodes", "Pods", "NodePools", "GetInstanceTypes", "DaemonSets", "Namespaces"} {
		assert.Equal(t, 1, counted.reads[kind], "%s is read once for %d snapshots", kind, len(requests))
	}

	// The memo keeps its first picture; a new one reads the cluster again.
	pod(t, "late", "", nil)
	snap, err := snapshot.Build(ctx, memo, snapshot.Request{})
	require.NoError(t, err)
	assert.NotContains(t, names(snap.Input.Pods), "late")
	snap, err = snapshot.Build(ctx, snapshot.Memo(counted), snapshot.Request{})
	require.NoError(t, err)
	assert.Contains(t, names(snap.Input.Pods), "late")
}

func TestMemoDoesNotKeepErrors(t *testing.T) {
	cleanup(t)
	ctx := context.Background()
	nodePool(t, "general", true, nil)
	pod(t, "pending", "", nil)
	counted := &countingView{View: snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: &fakeCluster{}},
		reads: map[string]int{}, failPods: true}
	memo := snapshot.Memo(counted)
	_, err := snapshot.Build(ctx, memo, snapshot.Request{})
	require.Error(t, err)
	snap, err := snapshot.Build(ctx, memo, snapshot.Request{})
	require.NoError(t, err, "the failed read is asked again")
	assert.Equal(t, []string{"pending"}, names(snap.Input.Pods))
	assert.Equal(t, 2, counted.reads["Pods"])

	// Not synced is asked again too; synced is kept.
	cluster := &fakeCluster{unsynced: true}
	counted = &countingView{View: snapshot.Live{Reader: cp.Client, Cloud: fakeCloud{}, Cluster: cluster}, reads: map[string]int{}}
	memo = snapshot.Memo(counted)
	_, err = snapshot.Build(ctx, memo, snapshot.Request{})
	require.ErrorIs(t, err, snapshot.ErrNotSynced)
	cluster.unsynced = false
	_, err = snapshot.Build(ctx, memo, snapshot.Request{})
	require.NoError(t, err)
	cluster.unsynced = true
	_, err = snapshot.Build(ctx, memo, snapshot.Request{})
	require.NoError(t, err, "a memo that saw the view synced stays synced")
	assert.Equal(t, 2, counted.reads["Synced"])
}
