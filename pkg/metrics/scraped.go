package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ScrapedGaugeVec is a gauge family whose series are computed at each
// scrape from what their sources already hold (a controller's view of its
// objects) instead of being kept between scrapes: a GaugeVec would keep a
// copy of every series' label values for as long as the object lives,
// and a "seconds so far" value would need a periodic pass to stay
// current.
type ScrapedGaugeVec struct {
	desc *prometheus.Desc

	mu      sync.Mutex
	sources []func(emit func(value float64, labelValues ...string))
}

var _ prometheus.Collector = (*ScrapedGaugeVec)(nil)

// NewScrapedGaugeVec is a gauge family with opts' name and help and the
// given labels, with no source yet.
func NewScrapedGaugeVec(opts prometheus.GaugeOpts, labelNames []string) *ScrapedGaugeVec {
	return &ScrapedGaugeVec{desc: prometheus.NewDesc(prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name), opts.Help, labelNames, opts.ConstLabels)}
}

// AddSource adds a source of series: at each scrape it calls emit once per
// series, with the label values in the family's order.
func (g *ScrapedGaugeVec) AddSource(source func(emit func(value float64, labelValues ...string))) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sources = append(g.sources, source)
}

// SetSource makes source the family's only source, replacing any added
// before: for a family one object feeds (the cluster state's pods), so that
// a process that builds that object again (tests do) serves the latest.
func (g *ScrapedGaugeVec) SetSource(source func(emit func(value float64, labelValues ...string))) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sources = []func(func(float64, ...string)){source}
}

// Describe implements prometheus.Collector.
func (g *ScrapedGaugeVec) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector: every source's series as they
// are now.
func (g *ScrapedGaugeVec) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	sources := append([]func(func(float64, ...string)){}, g.sources...)
	g.mu.Unlock()
	emit := func(v float64, values ...string) {
		// A series whose label values do not fit the family is left out,
		// not a failed scrape.
		if m, err := prometheus.NewConstMetric(g.desc, prometheus.GaugeValue, v, values...); err == nil {
			ch <- m
		}
	}
	for _, source := range sources {
		source(emit)
	}
}
