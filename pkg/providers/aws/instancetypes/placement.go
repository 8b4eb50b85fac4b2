package instancetypes

import (
	"sort"
)

// PlacementStrategies are the placement group strategies EC2 lists for
// the type (PlacementGroupInfo.SupportedStrategies); known is false when
// the type is not loaded or EC2 lists none (the local AWS's catalog), and
// callers then do not filter on it.
func (p *Provider) PlacementStrategies(name string) (strategies []string, known bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	i := sort.Search(len(p.infos), func(i int) bool { return string(p.infos[i].InstanceType) >= name })
	if i == len(p.infos) || string(p.infos[i].InstanceType) != name {
		return nil, false
	}
	pg := p.infos[i].PlacementGroupInfo
	if pg == nil || len(pg.SupportedStrategies) == 0 {
		return nil, false
	}
	for _, s := range pg.SupportedStrategies {
		strategies = append(strategies, string(s))
	}
	return strategies, true
}
