package benchmark

import (
	"testing"

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

// TestTraceRunKeepsEveryPod: after a trace, with either algorithm, every
// deployment runs its last step's replicas, no node holds two pods of an
// anti-affine deployment, and the fleet's allocatable covers the requests.
func TestTraceRunKeepsEveryPod(t *testing.T) {
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

// TestTraceEndState checks the end state of one run directly.
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
