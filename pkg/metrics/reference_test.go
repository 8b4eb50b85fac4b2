package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// referencePath is the generated metrics reference.
var referencePath = filepath.Join("..", "..", "docs", "metrics.md")

// TestReference checks docs/metrics.md against the registry: every metric
// of All() with its type, labels and help. UPDATE_METRICS_DOC=1 rewrites
// the file instead.
func TestReference(t *testing.T) {
	got := reference(t)
	if os.Getenv("UPDATE_METRICS_DOC") != "" {
		require.NoError(t, os.WriteFile(referencePath, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(referencePath)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "docs/metrics.md is stale: run UPDATE_METRICS_DOC=1 go test ./pkg/metrics -run TestReference")
}

type described struct {
	name, typ, help string
	labels          []string
}

func reference(t *testing.T) string {
	var b strings.Builder
	b.WriteString("# Metrics reference\n\n")
	b.WriteString("Generated from the controller's registry (`pkg/metrics`) by `UPDATE_METRICS_DOC=1 go test ./pkg/metrics -run TestReference`;\n")
	b.WriteString("`make test` fails when this file is stale. [compatibility.md](compatibility.md) §5 says which metrics are ours; the\n")
	b.WriteString("others keep upstream's names, types and labels. controller-runtime, client-go and Go runtime series are exported too and\n")
	b.WriteString("not listed.\n\n")
	b.WriteString("| metric | type | labels | help |\n|---|---|---|---|\n")
	for _, m := range describe(t) {
		labels := "—"
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.typ, labels, strings.ReplaceAll(m.help, "|", "\\|"))
	}
	return b.String()
}

func describe(t *testing.T) []described {
	t.Helper()
	var out []described
	for _, c := range All() {
		typ := typeOf(c)
		require.NotEmptyf(t, typ, "no type for %T", c)
		ch := make(chan *prometheus.Desc, 8)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m, err := parseDesc(d.String())
			require.NoError(t, err)
			m.typ = typ
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func typeOf(c prometheus.Collector) string {
	// A Gauge also has a Counter's methods: ask for it first.
	switch c.(type) {
	case prometheus.Gauge, *prometheus.GaugeVec:
		return "gauge"
	case prometheus.Counter, *prometheus.CounterVec:
		return "counter"
	case prometheus.Histogram, *prometheus.HistogramVec:
		return "histogram"
	case prometheus.Summary, *prometheus.SummaryVec:
		return "summary"
	}
	return ""
}

// parseDesc reads the name, help and variable labels out of Desc.String()
// (client_golang has no accessor for them).
func parseDesc(s string) (described, error) {
	var m described
	rest, ok := strings.CutPrefix(s, "Desc{fqName: ")
	if !ok {
		return m, fmt.Errorf("unexpected desc %q", s)
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return m, fmt.Errorf("desc %q: %w", s, err)
	}
	m.name, _ = strconv.Unquote(q)
	rest, ok = strings.CutPrefix(rest[len(q):], ", help: ")
	if !ok {
		return m, fmt.Errorf("unexpected desc %q", s)
	}
	if q, err = strconv.QuotedPrefix(rest); err != nil {
		return m, fmt.Errorf("desc %q: %w", s, err)
	}
	m.help, _ = strconv.Unquote(q)
	i := strings.LastIndex(rest, "variableLabels: {")
	if i < 0 {
		return m, fmt.Errorf("unexpected desc %q", s)
	}
	vl := strings.TrimSuffix(strings.TrimSuffix(rest[i+len("variableLabels: {"):], "}"), "}")
	if vl != "" {
		m.labels = strings.Split(vl, ",")
	}
	return m, nil
}
