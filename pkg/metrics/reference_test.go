package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/sets"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
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

func reference(t *testing.T) string {
	var b strings.Builder
	b.WriteString("# Metrics reference\n\n")
	b.WriteString("Generated from the controller's registry (`pkg/metrics`) by `UPDATE_METRICS_DOC=1 go test ./pkg/metrics -run TestReference`;\n")
	b.WriteString("`make test` fails when this file is stale. [compatibility.md](compatibility.md) §5 says which metrics are ours; the\n")
	b.WriteString("others keep upstream's names, types and labels. controller-runtime, client-go and Go runtime series are exported too and\n")
	b.WriteString("not listed. The per-node gauges (`karpenter_nodes_allocatable` and its siblings) carry one label per well-known node\n")
	b.WriteString("label of the running provider; they are listed with the core's. The `operator_nodeclaim_*` and `operator_node_*` series\n")
	b.WriteString("carry the provider's NodeClass label; they are listed as the AWS provider labels them (`karpenter_k8s_aws_ec2nodeclass`;\n")
	b.WriteString("the kwok provider's is `karpenter_kwok_sh_kwoknodeclass`). The `aws_sdk_go_*` series appear with the AWS provider.\n\n")
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

// documented is what the reference lists: All(), the node gauges with the
// core's well-known node labels, and the per-kind status metrics as the AWS
// provider labels them.
func documented() []prometheus.Collector {
	out := append([]prometheus.Collector{}, All()...)
	out = append(out, NewNodeGauges(sets.List(v1.WellKnownLabels)).Collectors()...)
	nodeClass := []string{"karpenter.k8s.aws/ec2nodeclass"}
	for _, m := range []*StatusMetrics{NodeClaimStatusMetrics(nodeClass), NodeStatusMetrics(nodeClass), NodePoolStatusMetrics(),
		CapacityBufferStatusMetrics(), NodeClassStatusMetrics("ec2nodeclass")} {
		out = append(out, m.Collectors()...)
	}
	return out
}

func describe(t *testing.T) []described {
	t.Helper()
	var out []described
	for _, c := range documented() {
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
	switch c.(type) {
	case *prometheus.GaugeVec, *ScrapedGaugeVec:
		return "gauge"
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	// A plain metric's interfaces overlap (a Gauge has a Counter's methods,
	// a Summary a Histogram's): its written form says what it is.
	m, ok := c.(prometheus.Metric)
	if !ok {
		return ""
	}
	pb := &dto.Metric{}
	if m.Write(pb) != nil {
		return ""
	}
	switch {
	case pb.Gauge != nil:
		return "gauge"
	case pb.Counter != nil:
		return "counter"
	case pb.Histogram != nil:
		return "histogram"
	case pb.Summary != nil:
		return "summary"
	}
	return ""
}
