package cli

import (
	"context"
	"sort"

	"k8s.io/utils/clock"

	"github.com/karpenter-go/karpenter/pkg/scheduling"
	"github.com/karpenter-go/karpenter/pkg/state"
)

// listedCluster is the controller's own cluster state, fed once from a
// listing instead of informers. It holds every Node and NodeClaim listed,
// so it is synced by construction.
type listedCluster struct {
	*state.Cluster
}

func newListedCluster(o *Objects, its func(pool string) []*scheduling.InstanceType) *listedCluster {
	c := state.NewCluster(clock.RealClock{}, nil, state.Options{InstanceTypes: its})
	for i := range o.Nodes {
		c.UpdateNode(&o.Nodes[i])
	}
	for i := range o.NodeClaims {
		c.UpdateNodeClaim(&o.NodeClaims[i])
	}
	for i := range o.Pods {
		c.UpdatePod(&o.Pods[i])
	}
	for i := range o.DaemonSets {
		c.UpdateDaemonSet(&o.DaemonSets[i])
	}
	return &listedCluster{Cluster: c}
}

// Synced implements snapshot.Cluster. state.Cluster's own check lists the
// API server again, which an offline snapshot cannot do.
func (c *listedCluster) Synced(context.Context) bool { return true }

// Nodes returns every state node, sorted by name, so answers are stable.
func (c *listedCluster) Nodes() []*state.StateNode {
	out := c.Cluster.Nodes()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}
