package repack

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// efficiency is the cheapest conceivable price of the node's pods (the
// fractional cover of their cpu and memory by the pool's types) over its
// price, in (0, 1]. Pricing cpu at the cheapest cpu type and memory at
// the cheapest memory type instead (both from different families) rated
// a full balanced node well under 1, so well-packed nodes were repacked
// over and over in a churning cluster.
func (w *worker) efficiency(m *machine) float64 {
	if m.price <= 0 {
		return 1
	}
	var r vec
	for _, p := range m.pods {
		r = r.add(w.p.reqs[p])
	}
	return coverCost(w.p.cover[w.pool], r) / m.price
}

// launchable reports whether the pool's requirements allow the type: a
// pool's types are its NodeClass's (the cloud provider does not filter
// them by the pool), and a cover priced with types the pool cannot launch
// rated every node of a pool restricted to dearer types inefficient, so
// that the planner drained them all.
func launchable(sp *scheduling.NodePool, it *scheduling.InstanceType) bool {
	return it.Requirements.Intersects(sp.Requirements) == nil
}

// buyPrice is the type's cheapest available offering the pool's
// capacity types and zones allow (+Inf: none).
func buyPrice(sp *scheduling.NodePool, it *scheduling.InstanceType) float64 {
	price := math.Inf(1)
	for i := range it.Offerings {
		o := &it.Offerings[i]
		if o.Available && sp.Requirements.Get(v1.CapacityTypeLabelKey).Has(o.CapacityType) && sp.Requirements.Get(corev1.LabelTopologyZone).Has(o.Zone) && o.Price < price {
			price = o.Price
		}
	}
	return price
}

// cheapestPerUnit is the pool's cheapest $/h per millicore and per byte of
// allocatable.
func cheapestPerUnit(sp *scheduling.NodePool) [2]float64 {
	best := [2]float64{math.Inf(1), math.Inf(1)}
	for _, it := range sp.InstanceTypes {
		if !launchable(sp, it) {
			continue
		}
		price := buyPrice(sp, it)
		if math.IsInf(price, 1) {
			continue
		}
		alloc := allocOf(it)
		for r := 0; r < 2; r++ {
			if alloc[r] > 0 {
				best[r] = math.Min(best[r], price/alloc[r])
			}
		}
	}
	for r := range best {
		if math.IsInf(best[r], 1) {
			best[r] = 0
		}
	}
	return best
}

// coverFront is the pool's types as millicores and bytes of allocatable
// per $/h (at their cheapest offering the pool may buy), without the types
// another beats on both.
func coverFront(sp *scheduling.NodePool) [][2]float64 {
	var pts [][2]float64
	for _, it := range sp.InstanceTypes {
		if !launchable(sp, it) {
			continue
		}
		price := buyPrice(sp, it)
		if math.IsInf(price, 1) || price <= 0 {
			continue
		}
		alloc := allocOf(it)
		if alloc[0] > 0 && alloc[1] > 0 {
			pts = append(pts, [2]float64{alloc[0] / price, alloc[1] / price})
		}
	}
	sort.Slice(pts, func(i, j int) bool {
		if pts[i][0] != pts[j][0] {
			return pts[i][0] > pts[j][0]
		}
		return pts[i][1] > pts[j][1]
	})
	var front [][2]float64
	for _, q := range pts {
		if len(front) == 0 || q[1] > front[len(front)-1][1] {
			front = append(front, q)
		}
	}
	return front
}

// coverCost is the cheapest $/h of fractional machines of the front's
// types whose allocatable covers d's cpu and memory: the LP relaxation
// of buying a fleet for d. It is at most any real fleet's price, and
// tighter than pricing cpu and memory each at its cheapest type, which
// no single family offers together.
func coverCost(front [][2]float64, d vec) float64 {
	best := math.Inf(1)
	for _, q := range front {
		best = math.Min(best, math.Max(d[0]/q[0], d[1]/q[1]))
	}
	for i := range front {
		for j := i + 1; j < len(front); j++ {
			a, b := front[i], front[j]
			det := a[0]*b[1] - a[1]*b[0]
			if math.Abs(det) < 1e-18 {
				continue
			}
			xa := (d[0]*b[1] - d[1]*b[0]) / det
			xb := (a[0]*d[1] - a[1]*d[0]) / det
			if xa >= 0 && xb >= 0 {
				best = math.Min(best, xa+xb)
			}
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

// kept reports whether m stays as it is this pass: it receives pods and is
// left out of replacements and N→M moves (a delete into free room may
// still take it). With Options.KeepEfficiency set, a node at least that
// efficient is kept. Otherwise the payback gate's own rule decides, applied
// to what a repack could save on m: its price less what its pods would
// cost on the pool's cheapest machines (keepPrice). m is
// kept when that saving over the horizon does not exceed the disruption
// cost of restarting its pods, that is when its efficiency is at least
// 1 − cost·RestartCost ÷ (price·Horizon): the threshold follows from the
// restart cost and the horizon, per node, instead of being a constant.
// With TakeAnySaving (no payback gate) the restart cost counts as 0.
func (w *worker) kept(m *machine, total vec) bool {
	if k := w.p.opts.KeepEfficiency; k > 0 {
		return w.efficiency(m) >= k
	}
	if m.price <= 0 {
		return true
	}
	var pb disruption.Payback
	if m.candidate != nil {
		pb = w.payback([]*machine{m}, w.keepPrice(m, total))
	} else {
		// A node the history rules hold is no candidate this pass; its
		// pods' eviction costs are what a later move would pay.
		pb = disruption.Payback{PriceBefore: m.price, PriceAfter: w.keepPrice(m, total), Horizon: w.p.opts.Horizon}
		cost := 0.0
		for _, p := range m.pods {
			if disruption.Reschedulable(p) {
				cost += math.Max(0, disruption.EvictionCost(p))
				pb.Evictions++
			}
		}
		pb.Saving = (pb.PriceBefore - pb.PriceAfter) * pb.Horizon.Hours()
		pb.Cost = cost * w.p.opts.RestartCost
	}
	w.keepFigures[m] = pb
	if w.p.opts.TakeAnySaving {
		// Without the payback gate no restart is priced: only a node no
		// repack could save anything on is kept.
		return pb.Saving <= 1e-9
	}
	return pb.Saving <= pb.Cost
}

// keepPrice is what m's pods would cost on the pool's cheapest machines:
// the larger of what they add to the fractional cover of the pool's pods
// (total) and the sum of their whole-machine floors (podFloor). With two
// resources the cover is subadditive (memory-heavy pods share machines
// with cpu-heavy ones), so the first is at most the cover of m's pods
// alone; it is their share of the whole fleet's ideal mix. The second
// counts that pods are indivisible: a pod of 7.5 of a machine's 8 vCPU
// costs a whole machine unless smaller pods fill the rest, where the
// fractional cover would price it at 94% of one.
func (w *worker) keepPrice(m *machine, total vec) float64 {
	var r vec
	floor := 0.0
	for _, p := range m.pods {
		q := w.p.reqs[p]
		r = r.add(q)
		floor += podFloor(w.p.shelves[w.pool], q)
	}
	front := w.p.cover[w.pool]
	return math.Max(floor, coverCost(front, total)-coverCost(front, total.sub(r)))
}

// shelf is one launchable type of a pool: its allocatable and its
// cheapest price the pool may buy.
type shelf struct {
	alloc vec
	price float64
}

// shelvesOf are the pool's launchable types as shelves.
func shelvesOf(sp *scheduling.NodePool) []shelf {
	var out []shelf
	for _, it := range sp.InstanceTypes {
		if !launchable(sp, it) {
			continue
		}
		price := buyPrice(sp, it)
		if !math.IsInf(price, 1) && price > 0 {
			out = append(out, shelf{alloc: allocOf(it), price: price})
		}
	}
	return out
}

// podFloor is the cheapest price per pod of machines holding copies of a
// pod of requests q only: the price of a type over how many copies its
// allocatable holds, at its best. For small pods it is close to their
// fractional cover; for a pod near a machine's size it is a whole machine.
func podFloor(shelves []shelf, q vec) float64 {
	best := math.Inf(1)
	for _, s := range shelves {
		k := s.alloc[2]
		for i := 0; i < 2; i++ {
			if q[i] > 0 {
				k = math.Min(k, math.Floor(s.alloc[i]/q[i]))
			}
		}
		if k >= 1 {
			best = math.Min(best, s.price/k)
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}
