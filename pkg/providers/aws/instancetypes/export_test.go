package instancetypes

// CachedLists is how many computed per-class lists the provider holds.
func (p *Provider) CachedLists() int {
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	return len(p.cache)
}
