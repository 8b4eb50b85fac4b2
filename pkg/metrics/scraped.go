package metrics

import (
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ScrapedGaugeVec is a gauge family whose series are computed at each
// scrape from what their sources already hold (a controller's view of its
// objects) instead of being kept between scrapes: a GaugeVec would keep a
// copy of every series' label values for as long as the object lives,
// and a "seconds so far" value would need a periodic pass to stay
// current.
type ScrapedGaugeVec struct {
	desc *prometheus.Desc
	// names are the label names sorted, as a series' label pairs are,
	// shared by every series; at[i] is where the i-th label value goes.
	// constLabels families build their series with NewConstMetric.
	names       []string
	at          []int
	constLabels bool

	mu      sync.Mutex
	sources []func(emit func(value float64, labelValues ...string))
}

var _ prometheus.Collector = (*ScrapedGaugeVec)(nil)

// NewScrapedGaugeVec is a gauge family with opts' name and help and the
// given labels, with no source yet.
func NewScrapedGaugeVec(opts prometheus.GaugeOpts, labelNames []string) *ScrapedGaugeVec {
	g := &ScrapedGaugeVec{
		desc:        prometheus.NewDesc(prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name), opts.Help, labelNames, opts.ConstLabels),
		names:       slices.Sorted(slices.Values(labelNames)),
		at:          make([]int, len(labelNames)),
		constLabels: len(opts.ConstLabels) > 0,
	}
	for i, name := range labelNames {
		g.at[i], _ = slices.BinarySearch(g.names, name)
	}
	return g
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
		if m, ok := g.series(v, values); ok {
			ch <- m
		}
	}
	for _, source := range sources {
		source(emit)
	}
}

// series is one series of the family. Its label pairs are built in two
// allocations, the names shared with the family: a scrape emits one series
// per pod and per condition of every object, and prometheus.NewConstMetric's
// three allocations per label were most of what a scrape allocated.
func (g *ScrapedGaugeVec) series(v float64, values []string) (prometheus.Metric, bool) {
	if g.constLabels {
		m, err := prometheus.NewConstMetric(g.desc, prometheus.GaugeValue, v, values...)
		return m, err == nil
	}
	if len(values) != len(g.at) {
		return nil, false
	}
	for _, value := range values {
		if !utf8.ValidString(value) {
			return nil, false
		}
	}
	slots := make([]labelSlot, len(values))
	pairs := make([]*dto.LabelPair, len(values))
	for i, value := range values {
		at := g.at[i]
		slot := &slots[at]
		slot.value = value
		slot.pair.Name, slot.pair.Value = &g.names[at], &slot.value
		pairs[at] = &slot.pair
	}
	return &GaugeSample{Family: g.desc, Labels: pairs, Value: v}, true
}

// labelSlot holds one label pair and the value it points at.
type labelSlot struct {
	pair  dto.LabelPair
	value string
}

// GaugeSample is one sample of a gauge family with its label pairs
// prepared by the caller (sorted by name, as the exposition wants them),
// so that label pairs can be shared between samples and kept between
// scrapes; the pairs must not change once handed over.
type GaugeSample struct {
	Family *prometheus.Desc
	Labels []*dto.LabelPair
	Value  float64
}

var _ prometheus.Metric = (*GaugeSample)(nil)

// Desc implements prometheus.Metric.
func (s *GaugeSample) Desc() *prometheus.Desc { return s.Family }

// Write implements prometheus.Metric.
func (s *GaugeSample) Write(out *dto.Metric) error {
	v := s.Value
	out.Label = s.Labels
	out.Gauge = &dto.Gauge{Value: &v}
	return nil
}
