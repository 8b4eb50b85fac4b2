package metrics

import (
	"slices"
	"strings"
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
	// allNames are the names of a series' label pairs, const labels
	// included, sorted: what a Series of the family must carry.
	allNames   []string
	constPairs []*dto.LabelPair

	mu            sync.Mutex
	sources       []func(emit func(value float64, labelValues ...string))
	seriesSources []func(emit func(value float64, s *Series))
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
	g.allNames = slices.Clone(g.names)
	for name, value := range opts.ConstLabels {
		g.constPairs = append(g.constPairs, NewLabelPair(name, value))
		g.allNames = append(g.allNames, name)
	}
	slices.Sort(g.allNames)
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
	g.sources, g.seriesSources = []func(func(float64, ...string)){source}, nil
}

// SetSeriesSource is SetSource for a source of kept series.
func (g *ScrapedGaugeVec) SetSeriesSource(source func(emit func(value float64, s *Series))) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sources, g.seriesSources = nil, []func(func(float64, *Series)){source}
}

// AddSeriesSource adds a source of series it keeps between scrapes (see
// Series): at each scrape it calls emit once per series.
func (g *ScrapedGaugeVec) AddSeriesSource(source func(emit func(value float64, s *Series))) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seriesSources = append(g.seriesSources, source)
}

// Describe implements prometheus.Collector.
func (g *ScrapedGaugeVec) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector: every source's series as they
// are now.
func (g *ScrapedGaugeVec) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	sources := append([]func(func(float64, ...string)){}, g.sources...)
	seriesSources := append([]func(func(float64, *Series)){}, g.seriesSources...)
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
	emitSeries := func(v float64, s *Series) {
		// A series built for another family's label names is left out.
		if s != nil && s.fits(g) {
			ch <- &GaugeSample{Family: g.desc, Labels: s.pairs, Value: v}
		}
	}
	for _, source := range seriesSources {
		source(emitSeries)
	}
}

// Series is a series' label pairs built once, for a source that keeps them
// between scrapes while its label values stay the same: a scrape then
// allocates only the sample. Label pairs are immutable once built, so a
// pair (NewLabelPair) can be shared by many series, and a Series by the
// families with the same label names.
type Series struct {
	pairs []*dto.LabelPair
}

// NewLabelPair is a label pair for NewSeries.
func NewLabelPair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: &name, Value: &value}
}

// NewSeries is a series of the family with the given label pairs, one per
// label name of the family, in any order; ok is false when their names are
// not the family's or a value is not UTF-8.
func (g *ScrapedGaugeVec) NewSeries(pairs ...*dto.LabelPair) (*Series, bool) {
	if len(pairs) != len(g.at) {
		return nil, false
	}
	out := make([]*dto.LabelPair, 0, len(pairs)+len(g.constPairs))
	for _, p := range pairs {
		if p == nil || !utf8.ValidString(p.GetValue()) {
			return nil, false
		}
		out = append(out, p)
	}
	out = append(out, g.constPairs...)
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	s := &Series{pairs: out}
	if !s.fits(g) {
		return nil, false
	}
	return s, true
}

// SeriesOf is NewSeries from label values in the family's order, each pair
// taken from shared except at the positions listed in unshared: values
// that only one series has (a pod's or an object's name) would only fill
// shared.
func (g *ScrapedGaugeVec) SeriesOf(values []string, shared *LabelPairs, unshared ...int) (*Series, bool) {
	if len(values) != len(g.at) {
		return nil, false
	}
	pairs := make([]*dto.LabelPair, len(values))
	for i, v := range values {
		if slices.Contains(unshared, i) {
			pairs[i] = NewLabelPair(g.names[g.at[i]], v)
		} else {
			pairs[i] = shared.Get(g.names[g.at[i]], v)
		}
	}
	return g.NewSeries(pairs...)
}

// LabelPairs hands out one label pair for every series with the same
// label name and value. It holds at most Max pairs (4,096 when 0): when
// full it starts over, so that values that come and go (node names) do not
// grow it without end; series built before keep the pairs they have. It
// is not safe for concurrent use.
type LabelPairs struct {
	Max   int
	pairs map[[2]string]*dto.LabelPair
}

// Get is the pair for name and value.
func (t *LabelPairs) Get(name, value string) *dto.LabelPair {
	key := [2]string{name, value}
	if p, ok := t.pairs[key]; ok {
		return p
	}
	limit := t.Max
	if limit <= 0 {
		limit = 4096
	}
	if t.pairs == nil || len(t.pairs) >= limit {
		t.pairs = map[[2]string]*dto.LabelPair{}
	}
	p := NewLabelPair(name, value)
	t.pairs[key] = p
	return p
}

// fits reports whether the series' label names are the family's.
func (s *Series) fits(g *ScrapedGaugeVec) bool {
	if len(s.pairs) != len(g.allNames) {
		return false
	}
	for i, p := range s.pairs {
		if p.GetName() != g.allNames[i] {
			return false
		}
	}
	return true
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
