package cli

import (
	"context"
	"hash/fnv"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// nodesPerShard bounds the nodes one state.Cluster holds. Each update of a
// state.Cluster recomputes its pools' usage over every node it holds, so
// feeding it a whole listing costs O(nodes²): 17 s of CPU for 5,000 nodes.
// Shards of this size keep a one-off load linear while every node is still
// described by the controller's own state code.
const nodesPerShard = 64

// listedCluster is the cluster state of a one-off listing, split into
// shards by provider ID (else name), so a Node and its NodeClaim always meet
// in the same shard; pods go to the shard of the Node they are bound to. It
// holds every Node and NodeClaim listed, so it is synced by construction.
type listedCluster struct {
	shards     []*state.Cluster
	nodeShard  map[string]*state.Cluster // Node and NodeClaim name -> shard
	daemonSets []*appsv1.DaemonSet
}

func newListedCluster(o *Objects, its func(pool string) []*scheduling.InstanceType) *listedCluster {
	n := max(1, (max(len(o.Nodes), len(o.NodeClaims))+nodesPerShard-1)/nodesPerShard)
	c := &listedCluster{nodeShard: map[string]*state.Cluster{}}
	for range n {
		c.shards = append(c.shards, state.NewCluster(clock.RealClock{}, nil, state.Options{InstanceTypes: its}))
	}
	shard := func(providerID, name string) *state.Cluster {
		key := providerID
		if key == "" {
			key = name
		}
		h := fnv.New32a()
		h.Write([]byte(key))
		return c.shards[int(h.Sum32()%uint32(n))]
	}
	for i := range o.Nodes {
		node := &o.Nodes[i]
		s := shard(node.Spec.ProviderID, node.Name)
		s.UpdateNode(node)
		c.nodeShard[node.Name] = s
	}
	for i := range o.NodeClaims {
		nc := &o.NodeClaims[i]
		s := shard(nc.Status.ProviderID, nc.Name)
		s.UpdateNodeClaim(nc)
		if _, ok := c.nodeShard[nc.Name]; !ok {
			c.nodeShard[nc.Name] = s
		}
	}
	for i := range o.Pods {
		p := &o.Pods[i]
		s, ok := c.nodeShard[p.Spec.NodeName]
		if !ok {
			s = c.shards[0]
		}
		s.UpdatePod(p)
	}
	// DaemonSets are cluster-wide: the first shard keeps them (with the
	// newest pod of each, which the solver uses for overhead).
	for i := range o.DaemonSets {
		c.shards[0].UpdateDaemonSet(&o.DaemonSets[i])
	}
	c.daemonSets = c.shards[0].DaemonSets()
	return c
}

// Synced implements snapshot.Cluster.
func (c *listedCluster) Synced(context.Context) bool { return true }

// SchedulingNodes implements snapshot.Cluster, sorted by name as
// state.Cluster sorts them.
func (c *listedCluster) SchedulingNodes() []*scheduling.ExistingNode {
	var out []*scheduling.ExistingNode
	for _, s := range c.shards {
		out = append(out, s.SchedulingNodes()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NodePoolResources implements snapshot.Cluster: the shards' sum.
func (c *listedCluster) NodePoolResources(pool string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, s := range c.shards {
		for name, q := range s.NodePoolResources(pool) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// NodePoolsUsage sums the shards' usage per pool.
func (c *listedCluster) NodePoolsUsage() map[string]state.NodePoolUsage {
	out := map[string]state.NodePoolUsage{}
	for _, s := range c.shards {
		for pool, u := range s.NodePoolsUsage() {
			sum, ok := out[pool]
			if !ok {
				sum.Resources = corev1.ResourceList{}
			}
			sum.Nodes += u.Nodes
			for name, q := range u.Resources {
				t := sum.Resources[name]
				t.Add(q)
				sum.Resources[name] = t
			}
			out[pool] = sum
		}
	}
	return out
}

// Nodes returns every state node, sorted by name.
func (c *listedCluster) Nodes() []*state.StateNode {
	var out []*state.StateNode
	for _, s := range c.shards {
		out = append(out, s.Nodes()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Node finds the state node with this Node or NodeClaim name.
func (c *listedCluster) Node(name string) (*state.StateNode, bool) {
	s, ok := c.nodeShard[name]
	if !ok {
		return nil, false
	}
	return s.Node(name)
}

// DaemonSets are the listed DaemonSets, sorted by namespace/name.
func (c *listedCluster) DaemonSets() []*appsv1.DaemonSet { return c.daemonSets }
