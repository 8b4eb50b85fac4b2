package benchmark

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption/repack"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// TestMinEvictions: hand-built fleets whose least eviction count is known.
func TestMinEvictions(t *testing.T) {
	node := func(price float64, evict int, cpu, mem float64) boundNode {
		return boundNode{price: price, evict: evict, room: [2]float64{cpu, mem}}
	}
	// One type to buy: 8 cpu and 8 memory at $1.2/h.
	buy := [][3]float64{{8, 8, 1.2}}
	tests := []struct {
		name   string
		nodes  []boundNode
		need   float64
		demand [2]float64
		kept   [2]float64
		rows   [][3]float64
		want   int
		ok     bool
	}{
		{"nothing to save", []boundNode{node(1, 3, 4, 4)}, 0, [2]float64{4, 4}, [2]float64{}, nil, 0, true},
		{"empty node is free", []boundNode{node(1, 0, 4, 4), node(1, 3, 4, 4)}, 1, [2]float64{4, 4}, [2]float64{}, nil, 0, true},
		// $1.4 from {1,3}, {1,2}, {0.5,1}: {1,2}+{0.5,1} is the only set under 4 evictions.
		{"knapsack", []boundNode{node(1, 3, 4, 4), node(1, 2, 4, 4), node(0.5, 1, 4, 4)}, 1.4, [2]float64{}, [2]float64{}, nil, 3, true},
		// Greedy by $/eviction ({0.5,1}, then the {1,2}s) needs 5
		// evictions; {2.1,3} alone reaches $2 with 3.
		{"not greedy", []boundNode{node(0.5, 1, 1, 1), node(1, 2, 1, 1), node(1, 2, 1, 1), node(2.1, 3, 1, 1)}, 2, [2]float64{}, [2]float64{}, nil, 3, true},
		{"unreachable", []boundNode{node(1, 3, 4, 4), node(1, 2, 4, 4)}, 2.5, [2]float64{}, [2]float64{}, nil, 0, false},
		// Both nodes full: removing one needs half a $1.2 machine
		// ($0.6), saving $0.4 < $0.5; removing both saves $2 - $1.2.
		{"re-housing costs", []boundNode{node(1, 2, 4, 4), node(1, 2, 4, 4)}, 0.5, [2]float64{8, 8}, [2]float64{}, buy, 4, true},
		{"re-housing ignored (weak)", []boundNode{node(1, 2, 4, 4), node(1, 2, 4, 4)}, 0.5, [2]float64{8, 8}, [2]float64{}, nil, 2, true},
		// Kept nodes hold 4 cpu and 4 memory of room: one node's pods fit
		// there, so removing it saves its whole price.
		{"room on kept nodes", []boundNode{node(1, 2, 4, 4), node(1, 2, 4, 4)}, 0.5, [2]float64{8, 8}, [2]float64{4, 4}, buy, 2, true},
		// The node of more $ per eviction is the big one: without it the
		// fleet has room for 2 of the 8 units, and re-housing 6 costs $0.9
		// of its $1.2; without the small one all 8 still fit.
		{"room decides", []boundNode{node(1.2, 2, 8, 8), node(0.8, 3, 2, 2)}, 0.7, [2]float64{8, 8}, [2]float64{}, buy, 3, true},
		{"re-housing makes it unreachable", []boundNode{node(1, 2, 4, 4), node(1, 2, 4, 4)}, 0.9, [2]float64{8, 8}, [2]float64{}, buy, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := minEvictions(tt.nodes, tt.need, tt.demand, tt.kept, tt.rows)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || (ok && got != tt.want) {
				t.Fatalf("got %d (reachable %v), want %d (reachable %v)", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestEvictionLowerBoundDoNotDisrupt: on a fleet of two like nodes, one
// running a do-not-disrupt pod, reaching the price of one node means
// removing the other, and reaching less is out of reach.
func TestEvictionLowerBoundDoNotDisrupt(t *testing.T) {
	dnd := traceNamed(t, "dnd-memory")
	tr := Trace{Name: "dnd", Catalog: dnd.Catalog, Pools: dnd.Pools, Daemon: true}
	c, err := tr.cluster()
	if err != nil {
		t.Fatal(err)
	}
	var it *scheduling.InstanceType
	for _, x := range c.Catalog {
		if x.Name == "r7a.xlarge" {
			it = x
		}
	}
	if it == nil {
		t.Fatal("catalog lacks r7a.xlarge")
	}
	dep := Deployment{Name: "mem", CPU: 500, Memory: 6144}
	protected := c.AddNode("general", it, c.poolOffer("general", it, "test-zone-a"), Epoch)
	p := tr.pod(c, dep, 1)
	p.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
	c.Bind(p, protected)
	plain := c.AddNode("general", it, c.poolOffer("general", it, "test-zone-a"), Epoch)
	for i := 2; i < 5; i++ {
		c.Bind(tr.pod(c, dep, i), plain)
	}
	one := nodePrice(c.Snap, plain)
	for _, tt := range []struct {
		name      string
		target    float64
		want      int
		reachable bool
	}{
		// The protected node has room for the plain node's three pods
		// beside its own, so they need no new machine.
		{"one node's price", one, 3, true},
		{"below one node", one * 0.9, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := c.EvictionLowerBound(tt.target)
			if err != nil {
				t.Fatal(err)
			}
			if b.Blocked != 1 || b.Reachable != tt.reachable || (tt.reachable && (b.Evictions != tt.want || b.Weak != tt.want)) {
				t.Fatalf("%+v, want %d evictions (reachable %v)", b, tt.want, tt.reachable)
			}
		})
	}
}

// fleetPrint is a fleet's nodes, their types and their pods, one line each.
func fleetPrint(c *Cluster) string {
	var lines []string
	for _, n := range c.Snap.Nodes {
		var pods []string
		for _, p := range n.Pods {
			pods = append(pods, p.Name)
		}
		sort.Strings(pods)
		lines = append(lines, fmt.Sprintf("%s %s %s %v", n.Name(), n.Node.Labels[corev1.LabelInstanceTypeStable], n.Node.Labels[corev1.LabelTopologyZone], pods))
	}
	return strings.Join(lines, "\n")
}

// TestFleetAtDeterministic: the fleet step 1 starts from is the same on
// every play of a trace and is the one a run's first consolidation starts
// from, and the planner's run, reaching its own end $/h, evicts at least
// the bound for that $/h.
func TestFleetAtDeterministic(t *testing.T) {
	tr := traceNamed(t, "anti-affinity")
	a, err := tr.FleetAt(1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.FleetAt(1)
	if err != nil {
		t.Fatal(err)
	}
	if fa, fb := fleetPrint(a), fleetPrint(b); fa != fb {
		t.Fatalf("two plays of %s differ after step 1's scale:\n%s\n---\n%s", tr.Name, fa, fb)
	}
	r, err := tr.run(Planner("planner", repack.Options{SpotToSpot: true}))
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Steps[0]; s.NodesStart != len(a.Snap.Nodes) || s.PriceStart != a.Price() {
		t.Fatalf("the run starts step 1 from %d nodes at $%.4f/h, FleetAt(1) is %d at $%.4f/h", s.NodesStart, s.PriceStart, len(a.Snap.Nodes), a.Price())
	}
	eb, err := a.EvictionLowerBound(r.PriceEnd)
	if err != nil {
		t.Fatal(err)
	}
	if !eb.Reachable || eb.Evictions > r.Evictions || eb.Evictions == 0 {
		t.Fatalf("planner ends at $%.3f/h with %d evictions; bound %+v", r.PriceEnd, r.Evictions, eb)
	}
}
