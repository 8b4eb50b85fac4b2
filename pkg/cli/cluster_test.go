package cli

import (
	"testing"

	"k8s.io/utils/clock"

	"github.com/karpenter-go/karpenter/pkg/state"
)

// TestListedClusterMatchesOneCluster checks that sharding changes nothing:
// the shards together describe the same nodes, pods and usage as one
// state.Cluster fed the same objects.
func TestListedClusterMatchesOneCluster(t *testing.T) {
	o := syntheticObjects(300, 3)
	// An unlaunched NodeClaim (no provider ID) and a pod bound to a node
	// that is not listed must survive sharding too.
	o.NodeClaims = append(o.NodeClaims, o.NodeClaims[0])
	o.NodeClaims[len(o.NodeClaims)-1].Name = "in-flight"
	o.NodeClaims[len(o.NodeClaims)-1].Status.ProviderID = ""
	o.Pods[0].Spec.NodeName = "gone"
	sharded := newListedCluster(o, nil)
	if len(sharded.shards) < 2 {
		t.Fatalf("want several shards, got %d", len(sharded.shards))
	}
	one := state.NewCluster(clock.RealClock{}, nil, state.Options{})
	for i := range o.Nodes {
		one.UpdateNode(&o.Nodes[i])
	}
	for i := range o.NodeClaims {
		one.UpdateNodeClaim(&o.NodeClaims[i])
	}
	for i := range o.Pods {
		one.UpdatePod(&o.Pods[i])
	}
	got, want := sharded.SchedulingNodes(), one.SchedulingNodes()
	if len(got) != len(want) {
		t.Fatalf("%d scheduling nodes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].NodeClaim != want[i].NodeClaim || len(got[i].Pods) != len(want[i].Pods) ||
			got[i].Initialized != want[i].Initialized {
			t.Fatalf("node %d: got %s (%s, %d pods), want %s (%s, %d pods)", i, got[i].Name, got[i].NodeClaim, len(got[i].Pods),
				want[i].Name, want[i].NodeClaim, len(want[i].Pods))
		}
	}
	gr, wr := sharded.NodePoolResources("amd64-only"), one.NodePoolResources("amd64-only")
	if len(gr) != len(wr) {
		t.Fatalf("resources %v, want %v", gr, wr)
	}
	for name, q := range wr {
		if g := gr[name]; g.Cmp(q) != 0 {
			t.Fatalf("resource %s: %s, want %s", name, g.String(), q.String())
		}
	}
	if g, w := sharded.NodePoolsUsage()["amd64-only"].Nodes, one.NodePoolUsage("amd64-only").Nodes; g != w {
		t.Fatalf("usage nodes %d, want %d", g, w)
	}
	if n, ok := sharded.Node("node-00042"); !ok || len(n.Pods) != 3 || n.NodeClaim == nil {
		t.Fatalf("node-00042: %+v %v", n, ok)
	}
}
