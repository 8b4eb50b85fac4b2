package state_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/state"
)

func newCluster(clk *clocktesting.FakeClock) *state.Cluster {
	return state.NewCluster(clk, cp.Client, state.Options{BatchMaxDuration: 10 * time.Second, PodMetrics: true})
}

func names(nodes []*state.StateNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name())
	}
	return out
}

func TestJoinByProviderID(t *testing.T) {
	tests := []struct {
		name  string
		steps func(c *state.Cluster)
		want  func(t *testing.T, nodes []*state.StateNode)
	}{
		{"unlaunched nodeclaim is tracked by name",
			func(c *state.Cluster) { c.UpdateNodeClaim(nodeClaim("nc-1", "default", "")) },
			func(t *testing.T, nodes []*state.StateNode) {
				require.Len(t, nodes, 1)
				assert.Equal(t, "nc-1", nodes[0].Name())
				assert.Nil(t, nodes[0].Node)
				assert.Equal(t, "", nodes[0].ProviderID())
			}},
		{"launch moves the nodeclaim to its provider id and the node joins it",
			func(c *state.Cluster) {
				c.UpdateNodeClaim(nodeClaim("nc-1", "default", ""))
				c.UpdateNodeClaim(nodeClaim("nc-1", "default", "kwok://n-1"))
				c.UpdateNode(node("n-1", "default", "kwok://n-1", false))
			},
			func(t *testing.T, nodes []*state.StateNode) {
				require.Len(t, nodes, 1)
				assert.Equal(t, "n-1", nodes[0].Name())
				assert.Equal(t, "nc-1", nodes[0].NodeClaim.Name)
				assert.Equal(t, "kwok://n-1", nodes[0].ProviderID())
			}},
		{"node first, then nodeclaim",
			func(c *state.Cluster) {
				c.UpdateNode(node("n-1", "default", "kwok://n-1", true))
				c.UpdateNodeClaim(nodeClaim("nc-1", "default", "kwok://n-1"))
			},
			func(t *testing.T, nodes []*state.StateNode) {
				require.Len(t, nodes, 1)
				assert.NotNil(t, nodes[0].Node)
				assert.NotNil(t, nodes[0].NodeClaim)
			}},
		{"deleting the node keeps the nodeclaim",
			func(c *state.Cluster) {
				c.UpdateNode(node("n-1", "default", "kwok://n-1", true))
				c.UpdateNodeClaim(nodeClaim("nc-1", "default", "kwok://n-1"))
				c.DeleteNode("n-1")
			},
			func(t *testing.T, nodes []*state.StateNode) {
				require.Len(t, nodes, 1)
				assert.Nil(t, nodes[0].Node)
				assert.Equal(t, "nc-1", nodes[0].Name())
			}},
		{"deleting both forgets the machine",
			func(c *state.Cluster) {
				c.UpdateNode(node("n-1", "default", "kwok://n-1", true))
				c.UpdateNodeClaim(nodeClaim("nc-1", "default", "kwok://n-1"))
				c.DeleteNodeClaim("nc-1")
				c.DeleteNode("n-1")
			},
			func(t *testing.T, nodes []*state.StateNode) { assert.Empty(t, nodes) }},
		{"node without provider id does not collide with a nodeclaim of the same name",
			func(c *state.Cluster) {
				c.UpdateNode(node("same", "", "", true))
				c.UpdateNodeClaim(nodeClaim("same", "default", ""))
			},
			func(t *testing.T, nodes []*state.StateNode) { assert.Len(t, nodes, 2) }},
		{"node gaining a provider id later joins its nodeclaim",
			func(c *state.Cluster) {
				c.UpdateNodeClaim(nodeClaim("nc-1", "default", "kwok://n-1"))
				c.UpdateNode(node("n-1", "default", "", false))
				c.UpdateNode(node("n-1", "default", "kwok://n-1", false))
			},
			func(t *testing.T, nodes []*state.StateNode) {
				require.Len(t, nodes, 1)
				assert.Equal(t, []string{"n-1"}, names(nodes))
				assert.NotNil(t, nodes[0].NodeClaim)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(clocktesting.NewFakeClock(time.Now()))
			tt.steps(c)
			tt.want(t, c.Nodes())
		})
	}
}

func TestPods(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	c.UpdateNode(node("n-1", "default", "kwok://n-1", true))
	c.UpdateNode(node("n-2", "default", "kwok://n-2", true))
	c.UpdatePod(pod("ns", "a", "n-1", "1"))
	c.UpdatePod(pod("ns", "b", "n-1", "500m"))
	c.UpdatePod(pod("ns", "pending", "", "1"))
	now := time.Now()
	c.UpdatePod(daemonSetPod("ns", "ds-old", "n-1", "ds", "100m", now.Add(-time.Minute)))
	c.UpdatePod(daemonSetPod("ns", "ds-new", "n-2", "ds", "200m", now))

	n1, ok := c.Node("n-1")
	require.True(t, ok)
	assert.Len(t, n1.Pods, 3)
	assert.Equal(t, "1500m", ptrQ(n1.PodRequests(), corev1.ResourceCPU))
	assert.Equal(t, "100m", ptrQ(n1.DaemonSetRequests(), corev1.ResourceCPU))

	// The newest DaemonSet pod stands for the DaemonSet.
	assert.Equal(t, "ds-new", c.DaemonSetPod(daemonSet("ns", "ds")).Name)

	// Moving, finishing and deleting pods unbinds them.
	moved := pod("ns", "b", "n-2", "500m")
	c.UpdatePod(moved)
	done := pod("ns", "a", "n-1", "1")
	done.Status.Phase = corev1.PodSucceeded
	c.UpdatePod(done)
	c.DeletePod(types.NamespacedName{Namespace: "ns", Name: "ds-old"})
	n1, _ = c.Node("n-1")
	assert.Empty(t, n1.Pods)
	n2, _ := c.Node("n-2")
	assert.Len(t, n2.Pods, 2)

	// Pods bound to a node the cache has not seen yet appear once it does.
	c.UpdatePod(pod("ns", "early", "n-3", "1"))
	c.UpdateNode(node("n-3", "", "kwok://n-3", true))
	n3, _ := c.Node("n-3")
	assert.Len(t, n3.Pods, 1)
}

func ptrQ(l corev1.ResourceList, name corev1.ResourceName) string {
	q := l[name]
	return q.String()
}

func TestDaemonSets(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	c.UpdateDaemonSet(daemonSet("b", "x"))
	c.UpdateDaemonSet(daemonSet("a", "y"))
	got := c.DaemonSets()
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].Namespace)
	c.DeleteDaemonSet(types.NamespacedName{Namespace: "a", Name: "y"})
	assert.Len(t, c.DaemonSets(), 1)
}

func TestNominationAndDeletionMarks(t *testing.T) {
	tests := []struct {
		name       string
		batchMax   time.Duration
		wantWindow time.Duration
	}{
		{"short batches nominate for 10s", 2 * time.Second, 10 * time.Second},
		{"long batches nominate for twice the batch", 30 * time.Second, 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			c := state.NewCluster(clk, cp.Client, state.Options{BatchMaxDuration: tt.batchMax})
			c.UpdateNodeClaim(nodeClaim("nc-1", "default", ""))
			c.NominateNodeForPod(context.Background(), "nc-1")
			n, _ := c.Node("nc-1")
			assert.True(t, n.Nominated(clk.Now()))
			clk.Step(tt.wantWindow - time.Millisecond)
			n, _ = c.Node("nc-1")
			assert.True(t, n.Nominated(clk.Now()))
			clk.Step(time.Millisecond)
			n, _ = c.Node("nc-1")
			assert.False(t, n.Nominated(clk.Now()))
		})
	}
	t.Run("marks", func(t *testing.T) {
		c := newCluster(clocktesting.NewFakeClock(time.Now()))
		c.UpdateNode(node("n-1", "default", "kwok://n-1", true))
		c.UpdateNodeClaim(nodeClaim("nc-1", "default", "kwok://n-1"))
		c.MarkForDeletion("nc-1")
		n, _ := c.Node("n-1")
		assert.True(t, n.MarkedForDeletion())
		assert.True(t, n.Deleting())
		assert.Empty(t, c.SchedulingNodes())
		c.UnmarkForDeletion("n-1")
		assert.Len(t, c.SchedulingNodes(), 1)
	})
}

func TestSchedulingNodes(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	// In flight: NodeClaim only.
	c.UpdateNodeClaim(nodeClaim("inflight", "default", "kwok://inflight"))
	// Registered, not initialized.
	c.UpdateNodeClaim(nodeClaim("starting", "default", "kwok://starting"))
	c.UpdateNode(node("starting", "default", "kwok://starting", false))
	// Initialized.
	c.UpdateNodeClaim(nodeClaim("ready", "default", "kwok://ready"))
	c.UpdateNode(node("ready", "default", "kwok://ready", true))
	c.UpdatePod(pod("ns", "p", "ready", "1"))
	// Unmanaged.
	c.UpdateNode(node("static", "", "other://static", false))
	// Deleting: left out.
	gone := node("gone", "", "other://gone", true)
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	gone.Finalizers = []string{"x"}
	c.UpdateNode(gone)

	got := map[string]*scheduling.ExistingNode{}
	for _, n := range c.SchedulingNodes() {
		got[n.Name] = n
	}
	require.Len(t, got, 4)

	in := got["inflight"]
	assert.True(t, in.Managed)
	assert.False(t, in.Initialized)
	assert.Equal(t, "default", in.Labels["karpenter.sh/nodepool"])
	assert.True(t, in.Requirements.Has(corev1.LabelArchStable))
	assert.Equal(t, "team", in.Taints[0].Key, "NodeClaim taints, startup taints excluded")
	assert.Len(t, in.Taints, 1)
	assert.True(t, in.Allocatable.Cpu().Equal(resource.MustParse("3800m")))

	st := got["starting"]
	assert.False(t, st.Initialized)
	assert.Equal(t, "zone-a", st.Labels[corev1.LabelTopologyZone], "NodeClaim labels fill in for the starting Node")
	assert.Equal(t, "starting", st.Labels[corev1.LabelHostname])
	assert.True(t, st.Allocatable.Cpu().Equal(resource.MustParse("3800m")))
	assert.Len(t, st.Taints, 1)

	rd := got["ready"]
	assert.True(t, rd.Initialized)
	assert.Nil(t, rd.Requirements)
	assert.True(t, rd.Allocatable.Cpu().Equal(resource.MustParse("3")))
	assert.Equal(t, "startup", rd.Taints[0].Key, "initialized nodes show their real taints")
	require.Len(t, rd.Pods, 1)
	assert.Equal(t, "p", rd.Pods[0].Name)

	sn := got["static"]
	assert.Nil(t, got["static"].Requirements)
	assert.False(t, sn.Managed)
	assert.True(t, sn.Initialized, "unmanaged nodes are initialized once they exist")
}

func TestUnlaunchedNodeClaimOffersItsRequests(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	nc := nodeClaim("new", "default", "")
	nc.Status = v1.NodeClaimStatus{}
	nc.Spec.Resources.Requests = rl("2", "1Gi")
	c.UpdateNodeClaim(nc)
	got := c.SchedulingNodes()
	require.Len(t, got, 1)
	assert.True(t, got[0].Allocatable.Cpu().Equal(resource.MustParse("2")))
}

func TestNodePoolUsage(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	c.UpdateNodeClaim(nodeClaim("a", "default", ""))               // estimate: 4 cpu
	c.UpdateNodeClaim(nodeClaim("b", "default", "kwok://b"))       // joined below
	c.UpdateNode(node("b", "default", "kwok://b", true))           // node capacity: 4 cpu
	c.UpdateNodeClaim(nodeClaim("c", "other", "kwok://c"))         // other pool
	c.UpdateNode(node("unmanaged", "", "other://unmanaged", true)) // not counted
	unlaunched := nodeClaim("d", "default", "")                    // no estimate yet: its requests count
	unlaunched.Status = v1.NodeClaimStatus{}
	unlaunched.Spec.Resources.Requests = rl("1", "1Gi")
	c.UpdateNodeClaim(unlaunched)
	deleting := nodeClaim("e", "default", "kwok://e") // being deleted: not counted
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	c.UpdateNodeClaim(deleting)

	u := c.NodePoolUsage("default")
	assert.Equal(t, 3, u.Nodes)
	assert.True(t, u.Resources.Cpu().Equal(resource.MustParse("9")))
	assert.True(t, u.Resources.Memory().Equal(resource.MustParse("33Gi")))
	res := c.NodePoolResources("default")
	assert.True(t, res.Cpu().Equal(resource.MustParse("9")))
	nodes := res[state.ResourceNodes]
	assert.Equal(t, int64(3), nodes.Value())
	all := c.NodePoolsUsage()
	assert.Len(t, all, 2)
	assert.Equal(t, 1, all["other"].Nodes)
	assert.Zero(t, c.NodePoolUsage("missing").Nodes)
	missing := c.NodePoolResources("missing")[state.ResourceNodes]
	assert.Zero(t, missing.Value())
}

// TestSynced runs against the API server: the cache is synced only once it
// holds every NodeClaim and Node, including a launched NodeClaim's provider ID.
func TestSynced(t *testing.T) {
	ctx := context.Background()
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	nc := nodeClaim("synced-nc", "default", "")
	require.NoError(t, cp.Client.Create(ctx, nc))
	n := node("synced-node", "", "kwok://synced-node", true)
	require.NoError(t, cp.Client.Create(ctx, n))
	t.Cleanup(func() {
		_ = cp.Client.Delete(ctx, nc)
		_ = cp.Client.Delete(ctx, n)
	})

	assert.False(t, c.Synced(ctx))
	c.UpdateNodeClaim(nc)
	assert.False(t, c.Synced(ctx), "node missing")
	c.UpdateNode(n)
	assert.True(t, c.Synced(ctx))

	// Launch in the API server but not yet in the cache: unsynced.
	nc.Status.ProviderID = "kwok://synced-nc"
	require.NoError(t, cp.Client.Status().Update(ctx, nc))
	assert.False(t, c.Synced(ctx))
	c.UpdateNodeClaim(nc)
	assert.True(t, c.Synced(ctx))
}

// TestNodePoolOfferings lists one offering per launched node of the pool,
// from its labels; unlaunched and deleting NodeClaims and other pools are
// left out.
func TestNodePoolOfferings(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	launched := func(name, pool, it, ct string) *corev1.Node {
		n := node(name, pool, "kwok://"+name, true)
		n.Labels[corev1.LabelInstanceTypeStable] = it
		n.Labels[corev1.LabelTopologyZone] = "zone-a"
		n.Labels[v1.CapacityTypeLabelKey] = ct
		return n
	}
	c.UpdateNodeClaim(nodeClaim("a", "default", "kwok://a"))
	c.UpdateNode(launched("a", "default", "c7a.large", "spot"))
	c.UpdateNodeClaim(nodeClaim("b", "default", "kwok://b"))
	c.UpdateNode(launched("b", "default", "c7a.xlarge", "on-demand"))
	c.UpdateNodeClaim(nodeClaim("pending", "default", "")) // not launched: no instance type
	gone := nodeClaim("gone", "default", "kwok://gone")
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	c.UpdateNodeClaim(gone)
	c.UpdateNode(launched("gone", "default", "c7a.large", "on-demand"))
	c.UpdateNodeClaim(nodeClaim("o", "other", "kwok://o"))
	c.UpdateNode(launched("o", "other", "c7a.large", "on-demand"))

	c.UpdatePod(pod("default", "half", "a", "1500m")) // a has 3 cpu allocatable

	got := c.NodePoolOfferings("default")
	sort.Slice(got, func(i, j int) bool { return got[i].InstanceType < got[j].InstanceType })
	require.Len(t, got, 2)
	assert.Equal(t, scheduling.OfferingKey{InstanceType: "c7a.large", Zone: "zone-a", CapacityType: "spot"}, got[0].OfferingKey)
	assert.InDelta(t, 0.5, got[0].Utilization, 1e-9, "1.5 of 3 cpu")
	assert.Equal(t, scheduling.OfferingKey{InstanceType: "c7a.xlarge", Zone: "zone-a", CapacityType: "on-demand"}, got[1].OfferingKey)
	assert.Zero(t, got[1].Utilization)
	assert.Empty(t, c.NodePoolOfferings("missing"))

	// A pod updated with other requests counts with them.
	c.UpdatePod(pod("default", "half", "a", "3"))
	got = c.NodePoolOfferings("default")
	sort.Slice(got, func(i, j int) bool { return got[i].InstanceType < got[j].InstanceType })
	assert.InDelta(t, 1.0, got[0].Utilization, 1e-9, "3 of 3 cpu")
}
