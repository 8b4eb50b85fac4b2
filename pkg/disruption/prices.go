package disruption

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

func instanceType(snap *Snapshot, pool, name string) *scheduling.InstanceType {
	if name == "" {
		return nil
	}
	for _, it := range snap.InstanceTypes[pool] {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// nodePrice is what the node costs: the cheapest offering of its instance
// type compatible with its labels (zone, capacity type, reservation).
func nodePrice(snap *Snapshot, n *Node) (float64, error) {
	if n.Node == nil {
		return 0, fmt.Errorf("no node")
	}
	labels := n.Node.Labels
	it := instanceType(snap, n.NodePool, labels[corev1.LabelInstanceTypeStable])
	if it == nil {
		return 0, fmt.Errorf("instance type %q not found", labels[corev1.LabelInstanceTypeStable])
	}
	price, found := it.PriceFor(labels)
	if !found {
		return 0, fmt.Errorf("no offering for zone %q and capacity type %q", labels[corev1.LabelTopologyZone], labels[v1.CapacityTypeLabelKey])
	}
	return price, nil
}

// candidatesPrice sums the candidates' prices.
func candidatesPrice(snap *Snapshot, cs []*Candidate) (float64, error) {
	total := 0.0
	for _, c := range cs {
		p, err := nodePrice(snap, c.Node)
		if err != nil {
			return 0, fmt.Errorf("getting offering price from candidate node %s: %w", c.Name(), err)
		}
		total += p
	}
	return total, nil
}

// WorstLaunchPrice is the most a NodeClaim of this type with reqs may cost
// at launch: among its available offerings compatible with reqs, those of
// the capacity type a launch prefers (reserved, then spot, then
// on-demand), the most expensive. +Inf when none is available.
func WorstLaunchPrice(it *scheduling.InstanceType, reqs scheduling.Requirements) float64 {
	for _, ct := range []string{v1.CapacityTypeReserved, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand} {
		if !reqs.Get(v1.CapacityTypeLabelKey).Has(ct) {
			continue
		}
		worst, found := 0.0, false
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if o.Available && o.CapacityType == ct && scheduling.OfferingCompatible(o, reqs) {
				worst, found = math.Max(worst, o.Price), true
			}
		}
		if found {
			return worst
		}
	}
	return math.Inf(1)
}

// byPrice orders types cheapest first (cheapest compatible offering), then
// by name.
func byPrice(its []*scheduling.InstanceType, reqs scheduling.Requirements) {
	sort.SliceStable(its, func(i, j int) bool {
		pi, pj := its[i].CheapestPrice(reqs), its[j].CheapestPrice(reqs)
		if pi != pj {
			return pi < pj
		}
		return its[i].Name < its[j].Name
	})
}

// cheaperThan keeps the types whose worst launch price is below max, and
// checks that they still satisfy the requirements' minValues.
func cheaperThan(its []*scheduling.InstanceType, reqs scheduling.Requirements, max float64) ([]*scheduling.InstanceType, error) {
	var out []*scheduling.InstanceType
	for _, it := range its {
		if WorstLaunchPrice(it, reqs) < max {
			out = append(out, it)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := satisfiesMinValues(out, reqs); err != nil {
		return nil, err
	}
	return out, nil
}

// satisfiesMinValues checks every requirement with minValues against the
// distinct values the types offer for its key.
func satisfiesMinValues(its []*scheduling.InstanceType, reqs scheduling.Requirements) error {
	for _, key := range reqs.Keys() {
		r := reqs[key]
		if r.MinValues <= 0 {
			continue
		}
		if n := distinctValues(its, r); n < r.MinValues {
			return fmt.Errorf("minValues requirement is not met for label(s) %s (needs %d, has %d)", key, r.MinValues, n)
		}
	}
	return nil
}

func distinctValues(its []*scheduling.InstanceType, r scheduling.Requirement) int {
	seen := map[string]bool{}
	for _, it := range its {
		var vals []string
		if r.Key == corev1.LabelInstanceTypeStable {
			vals = []string{it.Name}
		} else {
			vals = it.Requirements.Get(r.Key).Values()
		}
		for _, val := range vals {
			if r.Has(val) {
				seen[val] = true
			}
		}
	}
	return len(seen)
}

// minValuesPrefix is the shortest prefix of its (at least n long) that
// satisfies reqs' minValues.
func minValuesPrefix(its []*scheduling.InstanceType, reqs scheduling.Requirements, n int) []*scheduling.InstanceType {
	for k := min(n, len(its)); k <= len(its); k++ {
		if satisfiesMinValues(its[:k], reqs) == nil {
			return its[:k]
		}
	}
	return its
}

// copyReplacement copies a simulated NodeClaim so that filtering its types
// or narrowing its requirements leaves the simulation's answer alone.
func copyReplacement(nc *scheduling.NewNodeClaim) *scheduling.NewNodeClaim {
	out := *nc
	out.Requirements = nc.Requirements.Copy()
	out.InstanceTypes = append([]*scheduling.InstanceType(nil), nc.InstanceTypes...)
	return &out
}

// replacementPrice is the cheapest worst launch price among the types.
func replacementPrice(nc *scheduling.NewNodeClaim) float64 {
	best := math.Inf(1)
	for _, it := range nc.InstanceTypes {
		best = math.Min(best, WorstLaunchPrice(it, nc.Requirements))
	}
	return best
}

func replacementPriceOf(its []*scheduling.InstanceType, reqs scheduling.Requirements) float64 {
	best := math.Inf(1)
	for _, it := range its {
		best = math.Min(best, WorstLaunchPrice(it, reqs))
	}
	return best
}
