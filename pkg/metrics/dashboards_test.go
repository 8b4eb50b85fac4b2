package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	// The controller's controllers register the workqueue_ series; import
	// them so this registry holds what the binary's does.
	_ "sigs.k8s.io/controller-runtime/pkg/controller"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// seriesRef is a metric name in a PromQL expression, with the label
	// matchers that follow it, if any.
	seriesRef = regexp.MustCompile(`\b((?:karpenter|workqueue|controller_runtime)_[a-zA-Z0-9_]+)(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// TestDashboardsQueryExportedSeries checks every query of dashboards/*.json
// against what the controller exports: each karpenter_ series is a metric of
// All() (a histogram's _bucket, _sum and _count included) and every label a
// selector matches on is one of its labels; the controller-runtime series
// are registered in the controller's registry.
func TestDashboardsQueryExportedSeries(t *testing.T) {
	metrics := map[string]described{}
	for _, m := range describe(t) {
		metrics[m.name] = m
		if m.typ == "histogram" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				h := m
				h.labels = append(append([]string{}, m.labels...), "le")
				metrics[m.name+suffix] = h
			}
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "dashboards", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no dashboards found")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			require.NoError(t, err)
			var doc any
			require.NoError(t, json.Unmarshal(raw, &doc))
			queries := queriesOf(doc)
			require.NotEmpty(t, queries)
			seen := 0
			for _, q := range queries {
				for _, ref := range seriesRef.FindAllStringSubmatch(q, -1) {
					seen++
					name := ref[1]
					if !strings.HasPrefix(name, Namespace+"_") {
						assert.Truef(t, registered(name), "%s (in %q) is not registered by the controller", name, q)
						continue
					}
					m, ok := metrics[name]
					if !assert.Truef(t, ok, "%s (in %q) is not a metric the controller exports", name, q) {
						continue
					}
					for _, l := range matcher.FindAllStringSubmatch(ref[2], -1) {
						assert.Containsf(t, m.labels, l[1], "%s has no label %s (in %q)", name, l[1], q)
					}
				}
			}
			assert.NotZero(t, seen, "no series queried")
		})
	}
}

// queriesOf collects every PromQL string of a dashboard: panel targets'
// expr and template variables' query and definition.
func queriesOf(x any) []string {
	var out []string
	switch v := x.(type) {
	case map[string]any:
		for k, c := range v {
			if s, ok := c.(string); ok && (k == "expr" || k == "definition" || (k == "query" && strings.Contains(s, "("))) {
				out = append(out, s)
				continue
			}
			out = append(out, queriesOf(c)...)
		}
	case []any:
		for _, c := range v {
			out = append(out, queriesOf(c)...)
		}
	}
	return out
}

// registered reports whether name is taken in controller-runtime's
// registry: a probe under that name is refused.
func registered(name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	if err := crmetrics.Registry.Register(probe); err == nil {
		crmetrics.Registry.Unregister(probe)
		return false
	}
	return true
}
