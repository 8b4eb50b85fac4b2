package repack

import (
	"fmt"
	"sort"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/disruption"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// evaluate turns a solve into a move: every pod placed, each new
// NodeClaim narrowed to types that keep the whole move cheaper and are
// not a candidate's own type and capacity type, spot-to-spot only behind
// its gate. A nil move comes with the verdict that explains it.
func (w *worker) evaluate(cands []*machine, res *scheduling.Result) (*move, *disruption.Verdict) {
	first := cands[0].candidate
	before := 0.0
	same := map[[2]string]bool{}
	allSpot := true
	for _, m := range cands {
		before += m.price
		same[[2]string{m.instanceType, m.capacityType}] = true
		allSpot = allSpot && m.capacityType == v1.CapacityTypeSpot
	}
	var unplaced []string
	for _, pl := range res.Placements {
		if !pl.Scheduled() {
			unplaced = append(unplaced, pl.Pod.Namespace+"/"+pl.Pod.Name)
		}
	}
	if len(unplaced) > 0 {
		sort.Strings(unplaced)
		v := verdict(first, disruption.KindPodsDoNotFit, &disruption.ConsolidationDetail{})
		v.Pods = unplaced
		for _, pl := range res.Placements {
			if !pl.Scheduled() && pl.Pod.Namespace+"/"+pl.Pod.Name == unplaced[0] {
				v.Consolidation.Refusals = pl.Errors
			}
		}
		return nil, &v
	}
	used := map[int]bool{}
	for _, pl := range res.Placements {
		if pl.NodeClaim >= 0 {
			used[pl.NodeClaim] = true
		}
	}
	type claim struct {
		nc    *scheduling.NewNodeClaim
		types []*scheduling.InstanceType
		price []float64
	}
	var claims []claim
	after := 0.0
	for i, nc := range res.NewNodeClaims {
		if !used[i] {
			continue
		}
		r := *nc
		r.Requirements = nc.Requirements.Copy()
		ct := r.Requirements.Get(v1.CapacityTypeLabelKey)
		if ct.Has(v1.CapacityTypeSpot) && ct.Has(v1.CapacityTypeOnDemand) {
			// Priced as spot; an on-demand launch could cost more than the
			// candidates, so the replacement may only be spot (as upstream).
			narrowed := r.Requirements.Copy()
			narrowed.Add(scheduling.NewRequirement(v1.CapacityTypeLabelKey, scheduling.OpIn, v1.CapacityTypeSpot))
			for _, it := range nc.InstanceTypes {
				if launchCapacityType(it, narrowed) == v1.CapacityTypeSpot {
					r.Requirements = narrowed
					break
				}
			}
		}
		c := claim{nc: &r}
		sameHit := false
		for _, it := range nc.InstanceTypes {
			lct := launchCapacityType(it, r.Requirements)
			if lct == "" {
				continue
			}
			// Relaunching a candidate's own type and capacity type is
			// churn unless the move also ends machines (N→M with M < N).
			if len(used) >= len(cands) && same[[2]string{it.Name, lct}] {
				sameHit = true
				continue
			}
			if allSpot && lct == v1.CapacityTypeSpot && !w.p.opts.SpotToSpot {
				continue
			}
			c.types = append(c.types, it)
			c.price = append(c.price, disruption.WorstLaunchPrice(it, r.Requirements))
		}
		if len(c.types) == 0 {
			kind := disruption.KindNotCheaper
			if sameHit {
				kind = KindSameInstanceType
			} else if allSpot && !w.p.opts.SpotToSpot {
				kind = disruption.KindSpotToSpotDisabled
			}
			v := verdict(first, kind, &disruption.ConsolidationDetail{Price: before})
			if kind == KindSameInstanceType {
				v.Detail = fmt.Sprintf("The only cheaper fleet relaunches instance type %s (%s)", cands[0].instanceType, cands[0].capacityType)
			}
			return nil, &v
		}
		idx := make([]int, len(c.types))
		for k := range idx {
			idx[k] = k
		}
		sort.SliceStable(idx, func(a, b int) bool {
			if c.price[idx[a]] != c.price[idx[b]] {
				return c.price[idx[a]] < c.price[idx[b]]
			}
			return c.types[idx[a]].Name < c.types[idx[b]].Name
		})
		ts, ps := make([]*scheduling.InstanceType, len(idx)), make([]float64, len(idx))
		for k, j := range idx {
			ts[k], ps[k] = c.types[j], c.price[j]
		}
		c.types, c.price = ts, ps
		after += c.price[0]
		claims = append(claims, c)
	}
	if after >= before-1e-9 {
		v := verdict(first, disruption.KindNotCheaper, &disruption.ConsolidationDetail{Price: before, ReplacementPrice: after, Replacements: len(claims)})
		return nil, &v
	}
	mv := &move{cands: cands}
	slack := (before - after) / float64(max(len(claims), 1))
	for _, c := range claims {
		limit := c.price[0] + slack
		var keep []*scheduling.InstanceType
		for k, it := range c.types {
			if c.price[k] < limit {
				keep = append(keep, it)
			}
		}
		if allSpot && w.p.opts.SpotToSpot && len(cands) == 1 && len(claims) == 1 && launchCapacityType(keep[0], c.nc.Requirements) == v1.CapacityTypeSpot {
			if len(keep) < disruption.MinSpotToSpotInstanceTypes {
				v := verdict(first, disruption.KindSpotToSpotTooFewTypes, &disruption.ConsolidationDetail{Price: before, ReplacementPrice: after, Options: len(keep)})
				return nil, &v
			}
			keep = keep[:disruption.MinSpotToSpotInstanceTypes]
		}
		c.nc.Narrow(keep)
		mv.replacements = append(mv.replacements, c.nc)
	}
	mv.payback = w.payback(cands, after)
	return mv, nil
}

// launchCapacityType is the capacity type WorstLaunchPrice prices it at.
func launchCapacityType(it *scheduling.InstanceType, reqs scheduling.Requirements) string {
	for _, ct := range []string{v1.CapacityTypeReserved, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand} {
		if !reqs.Get(v1.CapacityTypeLabelKey).Has(ct) {
			continue
		}
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if o.Available && o.CapacityType == ct && scheduling.OfferingCompatible(o, reqs) {
				return ct
			}
		}
	}
	return ""
}
