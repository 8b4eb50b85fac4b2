package cloudprovider

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/karpenter-go/karpenter/pkg/apis/aws/v1"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/instance"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// exoticResources are the accelerators whose types a launch offers only when
// nothing plainer fits: a CPU-only NodeClaim should not land on a GPU box
// because its spot price dipped below a general-purpose type's.
var exoticResources = []corev1.ResourceName{
	awsv1.ResourceNVIDIAGPU, awsv1.ResourceAMDGPU, awsv1.ResourceAWSNeuron, awsv1.ResourceHabanaGaudi,
}

// filterLaunchTypes narrows the unreserved types a NodeClaim may launch
// before the fleet request is built, in upstream's order: metal and
// accelerator types go unless nothing else fits, then, when the NodeClaim
// allows both spot and on-demand and both are offered, spot offerings
// dearer than the cheapest on-demand offering. As upstream, a NodeClaim with
// minValues skips both, since they could leave too few distinct values.
func filterLaunchTypes(its []*scheduling.InstanceType, reqs scheduling.Requirements) []*scheduling.InstanceType {
	if hasMinValues(reqs) {
		return its
	}
	its = filterExotic(its)
	if mixedCapacity(its, reqs) {
		its = dropDearSpot(its, reqs)
	}
	return its
}

func hasMinValues(reqs scheduling.Requirements) bool {
	for _, k := range reqs.Keys() {
		if reqs.Get(k).MinValues > 0 {
			return true
		}
	}
	return false
}

// filterExotic drops bare-metal types and types with an accelerator, unless
// that would drop them all (the NodeClaim asked for a GPU, or its
// requirements allow nothing else).
func filterExotic(its []*scheduling.InstanceType) []*scheduling.InstanceType {
	var plain []*scheduling.InstanceType
	for _, it := range its {
		if !exotic(it) {
			plain = append(plain, it)
		}
	}
	if len(plain) == 0 {
		return its
	}
	return plain
}

func exotic(it *scheduling.InstanceType) bool {
	for _, size := range it.Requirements.Get(awsv1.LabelInstanceSize).Values() {
		if strings.Contains(size, "metal") {
			return true
		}
	}
	for _, r := range exoticResources {
		if q, ok := it.Capacity[r]; ok && !q.IsZero() {
			return true
		}
	}
	return false
}

// mixedCapacity: the NodeClaim allows spot and on-demand and the types offer
// both.
func mixedCapacity(its []*scheduling.InstanceType, reqs scheduling.Requirements) bool {
	ct := reqs.Get(scheduling.LabelCapacityType)
	if !ct.Has(instance.CapacityTypeSpot) || !ct.Has(instance.CapacityTypeOnDemand) {
		return false
	}
	spot, od := false, false
	for _, it := range its {
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if !launchable(o, reqs) {
				continue
			}
			spot = spot || o.CapacityType == instance.CapacityTypeSpot
			od = od || o.CapacityType == instance.CapacityTypeOnDemand
		}
	}
	return spot && od
}

// dropDearSpot removes the spot offerings priced above the cheapest
// on-demand offering, and the types left with nothing to launch. Upstream
// drops a type only when its cheapest offering is dearer, so a type whose
// spot price exceeds its own on-demand price could still launch as spot;
// here the offering goes, and a launch with no spot offering left is
// on-demand.
func dropDearSpot(its []*scheduling.InstanceType, reqs scheduling.Requirements) []*scheduling.InstanceType {
	cheapestOD := -1.0
	for _, it := range its {
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if launchable(o, reqs) && o.CapacityType == instance.CapacityTypeOnDemand && (cheapestOD < 0 || o.Price < cheapestOD) {
				cheapestOD = o.Price
			}
		}
	}
	var out []*scheduling.InstanceType
	for _, it := range its {
		keep := make([]scheduling.Offering, 0, len(it.Offerings))
		any := false
		for _, o := range it.Offerings {
			if o.CapacityType == instance.CapacityTypeSpot && o.Price > cheapestOD {
				continue
			}
			keep = append(keep, o)
			any = any || launchable(&o, reqs)
		}
		if !any {
			continue
		}
		if len(keep) == len(it.Offerings) {
			out = append(out, it)
			continue
		}
		cp := *it
		cp.Offerings = keep
		out = append(out, &cp)
	}
	return out
}

// launchable: an available, unreserved offering the NodeClaim allows.
func launchable(o *scheduling.Offering, reqs scheduling.Requirements) bool {
	return o.Available && o.ReservationID == "" && scheduling.OfferingCompatible(o, reqs)
}

// truncateTypes keeps at most limit types for a launch of capacityType:
// those with an offering of it, cheapest first, but always enough to meet
// the NodeClaim's minValues. The types that bring a value a minValues key
// still lacks are taken first (cheapest first), then the cheapest of the
// rest fill the remaining places. Upstream takes the cheapest limit and
// fails the launch when they miss a minValues; here that happens only when
// no choice of limit types meets them.
func truncateTypes(its []*scheduling.InstanceType, reqs scheduling.Requirements, capacityType string, limit int) ([]*scheduling.InstanceType, error) {
	price := map[*scheduling.InstanceType]float64{}
	var cands []*scheduling.InstanceType
	for _, it := range its {
		for i := range it.Offerings {
			o := &it.Offerings[i]
			if !launchable(o, reqs) || o.CapacityType != capacityType {
				continue
			}
			if p, ok := price[it]; !ok || o.Price < p {
				if !ok {
					cands = append(cands, it)
				}
				price[it] = o.Price
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if price[cands[i]] != price[cands[j]] {
			return price[cands[i]] < price[cands[j]]
		}
		return cands[i].Name < cands[j].Name
	})
	if len(cands) <= limit {
		return cands, nil
	}
	picked := map[*scheduling.InstanceType]bool{}
	seen := map[string]map[string]bool{}
	for _, k := range reqs.Keys() {
		if reqs.Get(k).MinValues > 0 {
			seen[k] = map[string]bool{}
		}
	}
	n := 0
	for _, it := range cands {
		adds := false
		for k, vals := range seen {
			for _, v := range typeValues(it, reqs, k) {
				if len(vals) < reqs.Get(k).MinValues && !vals[v] {
					adds = true
				}
			}
		}
		if !adds {
			continue
		}
		picked[it] = true
		n++
		for k, vals := range seen {
			for _, v := range typeValues(it, reqs, k) {
				vals[v] = true
			}
		}
	}
	for _, k := range reqs.Keys() {
		if min := reqs.Get(k).MinValues; min > 0 && (len(seen[k]) < min || n > limit) {
			return nil, fmt.Errorf("no %d of the %d launchable instance types meet minValues %d of %s", limit, len(cands), min, k)
		}
	}
	for _, it := range cands {
		if n >= limit {
			break
		}
		if !picked[it] {
			picked[it] = true
			n++
		}
	}
	out := make([]*scheduling.InstanceType, 0, n)
	for _, it := range cands {
		if picked[it] {
			out = append(out, it)
		}
	}
	return out, nil
}

// typeValues are the values of key a type brings toward the NodeClaim's
// minValues on it: its name for the instance-type key, else its label
// values the NodeClaim allows.
func typeValues(it *scheduling.InstanceType, reqs scheduling.Requirements, key string) []string {
	if key == scheduling.LabelInstanceType {
		return []string{it.Name}
	}
	r := it.Requirements.Get(key)
	if r.IsComplement() {
		return nil
	}
	var out []string
	for _, v := range r.Values() {
		if reqs.Get(key).Has(v) {
			out = append(out, v)
		}
	}
	return out
}
