package scheduling

import "math"

// OfferingRequirements are the labels a node bought through this offering
// carries: its zone, capacity type and any extra requirements.
func OfferingRequirements(o *Offering) Requirements {
	reqs := NewRequirements(
		NewRequirement(LabelZone, OpIn, o.Zone),
		NewRequirement(LabelCapacityType, OpIn, o.CapacityType),
	)
	if o.ReservationID != "" {
		reqs.Add(NewRequirement(LabelReservationID, OpIn, o.ReservationID))
	}
	for _, k := range o.Requirements.Keys() {
		reqs.Add(o.Requirements[k])
	}
	return reqs
}

// OfferingCompatible reports whether the offering can satisfy reqs (the keys
// reqs does not mention are unconstrained).
func OfferingCompatible(o *Offering, reqs Requirements) bool {
	if !reqs.Get(LabelZone).Has(o.Zone) || !reqs.Get(LabelCapacityType).Has(o.CapacityType) {
		return false
	}
	if o.ReservationID != "" && !reqs.Get(LabelReservationID).Has(o.ReservationID) {
		return false
	}
	return len(o.Requirements) == 0 || reqs.Intersects(o.Requirements) == nil
}

// CheapestPrice is the price of the cheapest available offering of the
// type compatible with reqs (+Inf when there is none).
func (it *InstanceType) CheapestPrice(reqs Requirements) float64 {
	best := math.Inf(1)
	for i := range it.Offerings {
		o := &it.Offerings[i]
		if o.Available && OfferingCompatible(o, reqs) && o.Price < best {
			best = o.Price
		}
	}
	return best
}

// Narrow limits the NodeClaim to its (in the order given), keeping the
// instance-type requirement in step (minValues kept). Price becomes what
// the solver charges a NodeClaim: the cheapest available offering of its
// first type compatible with the requirements.
func (nc *NewNodeClaim) Narrow(its []*InstanceType) {
	nc.InstanceTypes = its
	names := make([]string, 0, len(its))
	for _, it := range its {
		names = append(names, it.Name)
	}
	r := nc.Requirements.Get(LabelInstanceType)
	narrowed := NewRequirement(LabelInstanceType, OpIn, names...)
	narrowed.MinValues = r.MinValues
	nc.Requirements[LabelInstanceType] = narrowed
	if len(its) > 0 {
		nc.Price = its[0].CheapestPrice(nc.Requirements)
	}
}

// PriceFor is what a node of the type with these labels costs: its
// cheapest offering compatible with them (zone, capacity type,
// reservation), available or not, since the node already runs. ok is false
// when no offering matches.
func (it *InstanceType) PriceFor(labels map[string]string) (price float64, ok bool) {
	reqs := RequirementsFromLabels(labels)
	price = math.Inf(1)
	for i := range it.Offerings {
		o := &it.Offerings[i]
		if OfferingCompatible(o, reqs) && o.Price < price {
			price, ok = o.Price, true
		}
	}
	return price, ok
}
