package provisioning

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/pkg/scheduling"
)

// noCompatibleDedupe is how often a NodePool is told again that its
// requirements leave no instance type, as upstream's recorder dedupes it.
const noCompatibleDedupe = time.Minute

// ReasonNoCompatibleInstanceTypes is upstream's event reason on a NodePool
// whose requirements filter out every instance type it could launch.
const ReasonNoCompatibleInstanceTypes = "NoCompatibleInstanceTypes"

// poolWarnings remembers when each NodePool was last warned.
type poolWarnings struct {
	mu   sync.Mutex
	sent map[string]time.Time
}

// due reports whether pool may be warned now, and records it if so.
func (w *poolWarnings) due(pool string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent == nil {
		w.sent = map[string]time.Time{}
	}
	if last, ok := w.sent[pool]; ok && now.Sub(last) < noCompatibleDedupe {
		return false
	}
	w.sent[pool] = now
	return true
}

// warnIncompatiblePools sends NoCompatibleInstanceTypes to every pool of
// the round whose requirements leave no instance type with an available
// offering, or leave too few to meet a minValues.
func (p *Provisioner) warnIncompatiblePools(in *scheduling.Input, pools map[string]*v1.NodePool) {
	unavailable := map[scheduling.OfferingKey]bool{}
	for _, k := range in.Unavailable {
		unavailable[k] = true
	}
	for _, sp := range in.NodePools {
		np := pools[sp.Name]
		if np == nil {
			continue
		}
		compatible := compatibleInstanceTypes(sp, unavailable)
		msg := ""
		switch {
		case len(compatible) == 0:
			msg = "NodePool requirements filtered out all compatible available instance types"
		case p.opts.MinValuesPolicy != string(scheduling.MinValuesBestEffort) && !meetsMinValues(sp.Requirements, compatible):
			msg = "NodePool requirements filtered out all compatible available instance types due to minValues incompatibility"
		default:
			continue
		}
		if p.recorder != nil && p.poolWarnings.due(np.Name, p.clock.Now()) {
			p.recorder.Eventf(np, corev1.EventTypeWarning, ReasonNoCompatibleInstanceTypes, "%s", msg)
		}
	}
}

// compatibleInstanceTypes are the pool's instance types its requirements
// allow with at least one available offering they allow too.
func compatibleInstanceTypes(sp *scheduling.NodePool, unavailable map[scheduling.OfferingKey]bool) []*scheduling.InstanceType {
	zones, capacityTypes := sp.Requirements.Get(corev1.LabelTopologyZone), sp.Requirements.Get(v1.CapacityTypeLabelKey)
	var out []*scheduling.InstanceType
	for _, it := range sp.InstanceTypes {
		if sp.Requirements.Intersects(it.Requirements) != nil {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || unavailable[scheduling.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] {
				continue
			}
			if (sp.Requirements.Has(corev1.LabelTopologyZone) && !zones.Has(o.Zone)) ||
				(sp.Requirements.Has(v1.CapacityTypeLabelKey) && !capacityTypes.Has(o.CapacityType)) {
				continue
			}
			out = append(out, it)
			break
		}
	}
	return out
}

// meetsMinValues reports whether the instance types offer, for every key
// with a minValues, that many distinct values the requirement allows.
func meetsMinValues(reqs scheduling.Requirements, its []*scheduling.InstanceType) bool {
	for _, key := range reqs.Keys() {
		r := reqs.Get(key)
		if r.MinValues <= 0 {
			continue
		}
		values := map[string]bool{}
		for _, it := range its {
			for _, v := range it.Requirements.Get(key).Values() {
				if r.Has(v) {
					values[v] = true
				}
			}
		}
		if len(values) < r.MinValues {
			return false
		}
	}
	return true
}
