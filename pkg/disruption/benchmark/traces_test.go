package benchmark

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpenter-go/karpenter/pkg/scheduling"

	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
)

func traceNamed(t *testing.T, name string) Trace {
	t.Helper()
	for _, tr := range Traces {
		if tr.Name == name {
			return tr
		}
	}
	t.Fatalf("no trace %s", name)
	return Trace{}
}

// TestTraceRunConsolidates: a scale-in to 40% right after a scale-up is
// consolidated by either algorithm (pods evicted, more than one pass), and
// the fleet's allocatable still covers the requests.
func TestTraceRunConsolidates(t *testing.T) {
	for _, alg := range []func() Algorithm{Upstream, func() Algorithm { return Planner("planner", repack.Options{SpotToSpot: true}) }} {
		tr := traceNamed(t, "anti-affinity")
		a := alg()
		r, err := tr.run(a)
		if err != nil {
			t.Fatal(err)
		}
		if r.Evictions == 0 || r.Passes < 2 || r.AllocPerRequest < 1 {
			t.Fatalf("%s: a scale-in to 40%% should be consolidated: %+v", a.Name, r)
		}
	}
}

// TestTraceEndState: after the planner's run of a trace, every deployment
// runs its last step's replicas and no node holds two pods of the
// anti-affine one.
func TestTraceEndState(t *testing.T) {
	tr := traceNamed(t, "anti-affinity")
	c, err := tr.play(Planner("planner", repack.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	last := tr.Replicas[len(tr.Replicas)-1]
	count := map[string]int{}
	for _, n := range c.Snap.Nodes {
		perNode := map[string]int{}
		for _, p := range n.Pods {
			if !disruption.Reschedulable(p) {
				continue
			}
			count[p.Labels["app"]]++
			perNode[p.Labels["app"]]++
		}
		if perNode["ingress"] > 1 {
			t.Fatalf("node %s holds %d anti-affine ingress pods", n.Name(), perNode["ingress"])
		}
	}
	for i, d := range tr.Deps {
		if count[d.Name] != last[i] {
			t.Fatalf("%s runs %d pods, want %d", d.Name, count[d.Name], last[i])
		}
	}
}

// TestPDBThrottlesEvictions: a PDB allows its maxUnavailable less the pods
// still starting, so a pass right after evictions of its pods finds it
// exhausted and the next one finds it whole again.
func TestPDBThrottlesEvictions(t *testing.T) {
	tr := Trace{Name: "pdb", Catalog: traceNamed(t, "dnd-memory").Catalog, Pools: traceNamed(t, "dnd-memory").Pools,
		Deps: []Deployment{{Name: "app", CPU: 500, Memory: 1024, PDB: 10}}, Replicas: [][]int{{20}}}
	c, err := tr.cluster()
	if err != nil {
		t.Fatal(err)
	}
	pods := tr.scale(c, 0, nil)
	if _, err := c.Provision(pods, c.Snap.Now); err != nil {
		t.Fatal(err)
	}
	tr.refresh(c)
	if got := c.Snap.PDBs[0].Status.DisruptionsAllowed; got != 0 {
		t.Fatalf("20 pods just created, 10%% PDB allows %d, want 0", got)
	}
	c.Snap.Now = c.Snap.Now.Add(podStartup)
	tr.refresh(c)
	if got := c.Snap.PDBs[0].Status.DisruptionsAllowed; got != 2 {
		t.Fatalf("20 ready pods, 10%% PDB allows %d, want 2", got)
	}
}

// TestBindHonoursConstraints: the kube-scheduler stand-in that binds
// evicted pods puts an anti-affine pod beside none of its siblings and a
// zone-spread pod where the skew stays within maxSkew, even when the node
// with the most room is the one they rule out.
func TestBindHonoursConstraints(t *testing.T) {
	tr := Trace{Name: "bind", Catalog: traceNamed(t, "anti-affinity").Catalog, Pools: traceNamed(t, "anti-affinity").Pools}
	for _, tt := range []struct {
		name string
		dep  Deployment
	}{
		{"anti-affinity", Deployment{Name: "ingress", CPU: 500, Memory: 512, AntiAffinity: true}},
		{"zone spread", Deployment{Name: "front", CPU: 500, Memory: 512, ZoneSpread: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tr.cluster()
			if err != nil {
				t.Fatal(err)
			}
			var big, small *scheduling.InstanceType
			for _, it := range c.Catalog {
				switch it.Name {
				case "m7a.4xlarge":
					big = it
				case "m7a.xlarge":
					small = it
				}
			}
			if big == nil || small == nil {
				t.Fatal("catalog lacks m7a.4xlarge or m7a.xlarge")
			}
			// The roomiest node already runs a pod of the deployment (zone
			// a); the other node is in zone b.
			roomy := c.AddNode("general", big, c.poolOffer("general", big, "test-zone-a"), Epoch)
			other := c.AddNode("general", small, c.poolOffer("general", small, "test-zone-b"), Epoch)
			c.Bind(tr.pod(c, tt.dep, 1), roomy)
			p := tr.pod(c, tt.dep, 2)
			if left := c.bindLeastAllocated([]*corev1.Pod{p}); len(left) != 0 {
				t.Fatalf("pod left unbound")
			}
			if p.Spec.NodeName != other.Name() {
				t.Fatalf("pod bound to %s, want %s (the roomier node is ruled out)", p.Spec.NodeName, other.Name())
			}
		})
	}
}
