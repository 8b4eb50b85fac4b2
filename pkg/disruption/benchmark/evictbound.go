package benchmark

import (
	"fmt"
	"math"
	"math/rand"
	"sort"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
)

// EvictionBound is a lower bound on the evictions any consolidation needs
// to take a fleet from its $/h down to a target $/h (EvictionLowerBound).
type EvictionBound struct {
	// Evictions is the bound counting what the removed nodes' pods must
	// cost elsewhere; Weak the bound that counts a removed node's whole
	// price as saved. Evictions >= Weak.
	Evictions, Weak int
	// Reachable is false when removing every node the bound may remove
	// does not reach the target (then no algorithm under its assumptions
	// can, and the bounds are meaningless).
	Reachable bool
	// Fleet is the fleet's $/h, Target the $/h to reach.
	Fleet, Target float64
	// Nodes counts the fleet's nodes, Empty those without reschedulable
	// pods, Blocked those a do-not-disrupt pod keeps.
	Nodes, Empty, Blocked int
}

// boundNode is one node as the bound sees it: its $/h, the pods its
// removal evicts, and its room for reschedulable pods (cpu millicores,
// memory bytes: allocatable less its other pods' requests).
type boundNode struct {
	price float64
	evict int
	room  [2]float64
}

// boundSearchLimit caps the branch and bound's calls; a fleet that needs
// more is reported as an error, not as a bound.
const boundSearchLimit = 20_000_000

// EvictionLowerBound is a lower bound on the pods any consolidation must
// evict to take the cluster's fleet, as it stands, to at most target $/h,
// with the pods the fleet runs (no pods come or go meanwhile).
//
// The end fleet is the fleet's kept nodes K plus new nodes N; R are the
// removed nodes. Its assumptions:
//   - every reschedulable pod of a removed node is evicted at least once
//     (pods leave a node only by eviction), so the evictions are at least
//     Σ_R pods; evictions of pods on kept nodes only add to that;
//   - a node running a pod with karpenter.sh/do-not-disrupt "true" is never
//     removed (Karpenter never disrupts it voluntarily);
//   - the end fleet costs Σ_K price + cost(N), and cost(N) is at least the
//     LP relaxation over cpu and memory (fractional machines of every type
//     any pool may buy, at its cheapest offering there, plus each node's
//     own type at its own price, with the DaemonSet's requests taken off)
//     of covering what K has no room for: max(0, D - room(K)) per
//     resource, D the reschedulable pods' total requests. Pods are whole,
//     machines are whole, a pool's requirements and the pods' own
//     constraints (selectors, anti-affinity, spread, the pods resource)
//     only raise the real cost, so this is a floor.
//
// Reaching target needs Σ_R price - LP(max(0, D - room(K))) >= fleet -
// target; the bound is the least Σ_R pods over the sets R of removable
// nodes that satisfy it, found exactly by branch and bound over groups of
// identical nodes (the fleets are tens of nodes). Weak is the same with
// the LP term dropped (a removed node saves its whole price), a 0/1
// knapsack. Adding a node to R never lowers the left side (its own type
// covers its room at its price), so the empty nodes are always removed.
//
// It does not cover a trace's later steps: the fleet a later step starts
// from depends on the algorithm's earlier moves.
func (c *Cluster) EvictionLowerBound(target float64) (EvictionBound, error) {
	b := EvictionBound{Fleet: c.Price(), Target: target, Nodes: len(c.Snap.Nodes)}
	var ds [2]float64
	if !c.noDaemon {
		q := podReq(newPod("agent", "", daemon, "DaemonSet", daemon.name))
		ds = [2]float64{q[0], q[1]}
	}
	var rows [][3]float64 // cpu, memory, $/h of a new machine's room
	for _, pool := range c.poolNames() {
		reqs := c.poolReqs(pool)
		for _, it := range c.Snap.InstanceTypes[pool] {
			o := cheapestOffer(reqs, it, "")
			if o == nil {
				continue
			}
			a := allocatable(it)
			if cpu, mem := float64(a.Cpu().MilliValue())-ds[0], float64(a.Memory().Value())-ds[1]; cpu > 0 && mem > 0 {
				rows = append(rows, [3]float64{cpu, mem, o.Price})
			}
		}
	}
	var demand, kept [2]float64 // D, and the room of the nodes never removed
	var removable []boundNode
	for _, n := range c.Snap.Nodes {
		a := n.Node.Status.Allocatable
		bn := boundNode{price: nodePrice(c.Snap, n), room: [2]float64{float64(a.Cpu().MilliValue()), float64(a.Memory().Value())}}
		blocked := false
		for _, p := range n.Pods {
			q := podReq(p)
			if !disruption.Reschedulable(p) {
				bn.room[0], bn.room[1] = bn.room[0]-q[0], bn.room[1]-q[1]
				continue
			}
			demand[0], demand[1] = demand[0]+q[0], demand[1]+q[1]
			bn.evict++
			if p.Annotations[v1.DoNotDisruptAnnotationKey] == "true" {
				blocked = true
			}
		}
		if bn.room[0] > 0 && bn.room[1] > 0 {
			rows = append(rows, [3]float64{bn.room[0], bn.room[1], bn.price})
		}
		switch {
		case blocked:
			b.Blocked++
			kept[0], kept[1] = kept[0]+bn.room[0], kept[1]+bn.room[1]
		default:
			if bn.evict == 0 {
				b.Empty++
			}
			removable = append(removable, bn)
		}
	}
	var err error
	b.Weak, b.Reachable, err = minEvictions(removable, b.Fleet-target, demand, kept, nil)
	if err != nil || !b.Reachable {
		return b, err
	}
	b.Evictions, b.Reachable, err = minEvictions(removable, b.Fleet-target, demand, kept, rows)
	return b, err
}

// minEvictions is the least Σ evict over subsets R of nodes with
// Σ_R price - cover(R) >= need, where cover(R) is coverLP2(rows, max(0,
// demand - kept - room(nodes not in R))) (0 when rows is nil). ok is false
// when no subset qualifies.
func minEvictions(nodes []boundNode, need float64, demand, kept [2]float64, rows [][3]float64) (int, bool, error) {
	const eps = 1e-6 // in the bound's favour: a saving this short still counts
	if need <= eps {
		return 0, true, nil
	}
	// Identical nodes form a group: which of them go makes no difference.
	type group struct {
		n    boundNode
		size int
	}
	var groups []group
	idx := map[boundNode]int{}
	var base boundNode // the empty nodes, always removed
	var roomAll [2]float64
	total := 0
	for _, n := range nodes {
		roomAll[0], roomAll[1] = roomAll[0]+n.room[0], roomAll[1]+n.room[1]
		if n.evict == 0 {
			base.price += n.price
			base.room[0], base.room[1] = base.room[0]+n.room[0], base.room[1]+n.room[1]
			continue
		}
		total += n.evict
		if i, ok := idx[n]; ok {
			groups[i].size++
			continue
		}
		idx[n] = len(groups)
		groups = append(groups, group{n: n, size: 1})
	}
	// Best saving per eviction first: good sets early, and the suffix a
	// fractional knapsack bounds is in ratio order.
	sort.SliceStable(groups, func(i, j int) bool {
		return groups[i].n.price/float64(groups[i].n.evict) > groups[j].n.price/float64(groups[j].n.evict)
	})
	cover := func(removed [2]float64) float64 {
		if rows == nil {
			return 0
		}
		var d [2]float64
		for k := range d {
			d[k] = math.Max(0, demand[k]-kept[k]-(roomAll[k]-removed[k]))
		}
		if d[0] <= 0 && d[1] <= 0 {
			return 0
		}
		return coverLP2(rows, d)
	}
	// upper is the most $/h the groups from i on can add within budget
	// evictions (fractional knapsack, groups in ratio order).
	upper := func(i, budget int) float64 {
		sum := 0.0
		for ; i < len(groups) && budget > 0; i++ {
			g := groups[i]
			take := min(g.size, budget/g.n.evict)
			sum += float64(take) * g.n.price
			budget -= take * g.n.evict
			if take < g.size && budget > 0 {
				sum += g.n.price * float64(budget) / float64(g.n.evict)
				budget = 0
			}
		}
		return sum
	}
	best := total + 1 // no qualifying set yet
	calls := 0
	var search func(i, evict int, price float64, room [2]float64) error
	search = func(i, evict int, price float64, room [2]float64) error {
		if calls++; calls > boundSearchLimit {
			return fmt.Errorf("eviction bound: more than %d search steps over %d groups", boundSearchLimit, len(groups))
		}
		if evict >= best {
			return nil
		}
		c := cover(room)
		if price-c >= need-eps {
			best = evict
			return nil
		}
		// Removing more only raises the cover term, so it stays at least c.
		if i == len(groups) || price+upper(i, best-1-evict)-c < need-eps {
			return nil
		}
		g := groups[i]
		for k := g.size; k >= 0; k-- {
			r := [2]float64{room[0] + float64(k)*g.n.room[0], room[1] + float64(k)*g.n.room[1]}
			if err := search(i+1, evict+k*g.n.evict, price+float64(k)*g.n.price, r); err != nil {
				return err
			}
		}
		return nil
	}
	if err := search(0, 0, base.price, base.room); err != nil {
		return 0, false, err
	}
	if best > total {
		return 0, false, nil
	}
	return best, true, nil
}

// FleetAt is the cluster a trace's step s consolidation starts from when
// every earlier step was left as provisioned, without consolidation: for
// s = 1 the fleet every algorithm's first consolidation starts from.
func (t Trace) FleetAt(s int) (*Cluster, error) {
	c, err := t.cluster()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(t.Seed))
	for i := 0; i <= s; i++ {
		if err := t.arrive(c, i, rng); err != nil {
			return nil, err
		}
	}
	return c, nil
}
