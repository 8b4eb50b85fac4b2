package kwok

import (
	"context"
	"fmt"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// choose returns the instance type and offering to launch: among the
// catalog types the NodeClaim allows whose allocatable fits its requests,
// reserved offerings first, then spot, then on-demand, cheapest within a
// tier, ties broken by Pick.
//
// When the context carries instance types (cloudprovider.WithInstanceTypes:
// the NodePool's types with NodeOverlays applied) they replace the catalog,
// so overlaid capacity is fitted and overlaid prices ranked, and the node
// advertises the overlaid capacity as a device plugin would.
func (p *Provider) choose(ctx context.Context, nc *v1.NodeClaim, reqs scheduling.Requirements) (*cloudprovider.InstanceType, *cloudprovider.Offering, error) {
	candidates, byName := p.instanceTypes, p.byName
	if its, ok := cloudprovider.InstanceTypesFrom(ctx); ok {
		candidates, byName = its, make(map[string]*cloudprovider.InstanceType, len(its))
		for _, it := range its {
			byName[it.Name] = it
		}
	}
	if r, ok := reqs[scheduling.LabelInstanceType]; ok && !r.IsComplement() {
		candidates = make([]*cloudprovider.InstanceType, 0, len(r.Values()))
		for _, name := range r.Values() {
			if it := byName[name]; it != nil {
				candidates = append(candidates, it)
			}
		}
	}
	type choice struct {
		it *cloudprovider.InstanceType
		o  *cloudprovider.Offering
	}
	var best []choice
	bestTier, bestPrice := 0, 0.0
	p.mu.Lock()
	p.pruneUnavailableLocked()
	for _, it := range candidates {
		if reqs.Intersects(it.Requirements) != nil || !scheduling.Fits(nc.Spec.Resources.Requests, cloudprovider.Allocatable(it)) {
			continue
		}
		for j := range it.Offerings {
			o := &it.Offerings[j]
			if !o.Available || !p.offeringUsableLocked(it, o) || !scheduling.OfferingCompatible(o, reqs) {
				continue
			}
			tier := capacityTier(o.CapacityType)
			switch {
			case best == nil || tier < bestTier || (tier == bestTier && o.Price < bestPrice):
				best, bestTier, bestPrice = []choice{{it, o}}, tier, o.Price
			case tier == bestTier && o.Price == bestPrice:
				best = append(best, choice{it, o})
			}
		}
	}
	p.mu.Unlock()
	if len(best) == 0 {
		return nil, nil, cloudprovider.NewInsufficientCapacityError(
			fmt.Errorf("no available offering is compatible with nodeclaim %s (requirements %s)", nc.Name, reqs))
	}
	c := best[p.opts.Pick(len(best))]
	return c.it, c.o, nil
}

// capacityTier orders capacity types the way upstream launches them.
func capacityTier(ct string) int {
	switch ct {
	case scheduling.CapacityTypeReserved:
		return 0
	case scheduling.CapacityTypeSpot:
		return 1
	case scheduling.CapacityTypeOnDemand:
		return 2
	}
	return 3
}

// offeringUsableLocked reports whether the offering is not vetoed by the
// unavailable cache, the external cache or an exhausted reservation.
func (p *Provider) offeringUsableLocked(it *cloudprovider.InstanceType, o *cloudprovider.Offering) bool {
	key := cloudprovider.Key(it, o)
	if _, ok := p.unavailable[key]; ok {
		return false
	}
	if p.opts.Unavailable != nil && p.opts.Unavailable(key) {
		return false
	}
	if o.ReservationID != "" && p.reservationsUsed[o.ReservationID] >= o.ReservationCapacity {
		return false
	}
	return true
}

func (p *Provider) markUnavailable(key cloudprovider.OfferingKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unavailable[key] = p.clock.Now().Add(p.opts.UnavailableTTL)
}

func (p *Provider) pruneUnavailableLocked() {
	now := p.clock.Now()
	for k, expiry := range p.unavailable {
		if !now.Before(expiry) {
			delete(p.unavailable, k)
		}
	}
}

func (p *Provider) releaseReservation(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.reservedBy[name]; ok {
		delete(p.reservedBy, name)
		p.reservationsUsed[id]--
		if p.reservationsUsed[id] <= 0 {
			delete(p.reservationsUsed, id)
		}
	}
}
