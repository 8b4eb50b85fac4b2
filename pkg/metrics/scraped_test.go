package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScrapedSeriesAsConstMetrics: a scraped family's series carry the same
// label pairs (sorted by name) and value as prometheus.NewConstMetric's,
// pass a pedantic registry, and a series with the wrong number of label
// values or a value that is not UTF-8 is left out.
func TestScrapedSeriesAsConstMetrics(t *testing.T) {
	labels := []string{"zeta", "alpha", "mid"}
	g := NewScrapedGaugeVec(prometheus.GaugeOpts{Namespace: "test", Name: "scraped"}, labels)
	g.AddSource(func(emit func(float64, ...string)) {
		emit(1.5, "z1", "a1", "m1")
		emit(2, "z2", "a2", "m2")
		emit(3, "too", "few")
		emit(4, "z4", "a4", string([]byte{0xff}))
	})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(g))
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1)
	got := families[0].GetMetric()
	require.Len(t, got, 2)
	for i, values := range [][]string{{"z1", "a1", "m1"}, {"z2", "a2", "m2"}} {
		want := &dto.Metric{}
		require.NoError(t, prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, []float64{1.5, 2}[i], values...).Write(want))
		assert.Equal(t, fmt.Sprint(want.GetLabel()), fmt.Sprint(got[i].GetLabel()))
		assert.Equal(t, want.GetGauge().GetValue(), got[i].GetGauge().GetValue())
	}
}

// BenchmarkScrapedGaugeVec scrapes a family of 10,000 series of eight
// labels (karpenter_pods_state at 10,000 pods) through a registry.
//
//	go test -run '^$' -bench ScrapedGaugeVec -benchmem ./pkg/metrics/
func BenchmarkScrapedGaugeVec(b *testing.B) {
	labels := []string{"name", "namespace", "owner", "node", "nodepool", "zone", "phase", "schedulable"}
	g := NewScrapedGaugeVec(prometheus.GaugeOpts{Namespace: "bench", Name: "scraped"}, labels)
	g.AddSource(func(emit func(float64, ...string)) {
		for i := range 10000 {
			emit(1, fmt.Sprintf("pod-%d", i), "default", "web", fmt.Sprintf("node-%d", i/10), "default", "zone-a", "Running", "true")
		}
	})
	reg := prometheus.NewRegistry()
	require.NoError(b, reg.Register(g))
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestKeptSeries: a kept series gives the same exposition as a series
// emitted from its label values (const labels included), one built for
// other label names is refused or left out, and LabelPairs shares pairs
// until it is full, then starts over.
func TestKeptSeries(t *testing.T) {
	opts := prometheus.GaugeOpts{Namespace: "test", Name: "kept", ConstLabels: prometheus.Labels{"fixed": "yes"}}
	byValues := NewScrapedGaugeVec(opts, []string{"zeta", "alpha"})
	kept := NewScrapedGaugeVec(opts, []string{"zeta", "alpha"})
	other := NewScrapedGaugeVec(prometheus.GaugeOpts{Namespace: "test", Name: "other"}, []string{"zeta", "beta"})
	shared := &LabelPairs{}
	s, ok := kept.SeriesOf([]string{"z1", "a1"}, shared, 0)
	require.True(t, ok)
	foreign, ok := other.SeriesOf([]string{"z1", "b1"}, shared, 0)
	require.True(t, ok)
	_, ok = kept.SeriesOf([]string{"z1"}, shared)
	assert.False(t, ok, "too few values")
	_, ok = kept.NewSeries(NewLabelPair("zeta", "z"), NewLabelPair("beta", "b"))
	assert.False(t, ok, "names not the family's")
	_, ok = kept.SeriesOf([]string{"z1", string([]byte{0xff})}, shared)
	assert.False(t, ok, "not UTF-8")

	byValues.AddSource(func(emit func(float64, ...string)) { emit(2, "z1", "a1") })
	kept.AddSeriesSource(func(emit func(float64, *Series)) { emit(2, s); emit(3, foreign) })
	gather := func(g *ScrapedGaugeVec) string {
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(g))
		families, err := reg.Gather()
		require.NoError(t, err)
		require.Len(t, families, 1)
		return fmt.Sprint(families[0].GetMetric())
	}
	assert.Equal(t, gather(byValues), gather(kept), "the foreign series is left out")

	small := &LabelPairs{Max: 2}
	a := small.Get("n", "a")
	assert.Same(t, a, small.Get("n", "a"), "shared")
	small.Get("n", "b")
	c := small.Get("n", "c")
	assert.NotSame(t, a, small.Get("n", "a"), "started over when full")
	assert.Equal(t, "a", small.Get("n", "a").GetValue())
	assert.Same(t, c, small.Get("n", "c"))
}
