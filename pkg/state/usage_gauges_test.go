package state_test

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-go/karpenter/pkg/metrics"
)

func usageGauge(t *testing.T, pool, resource string) float64 {
	t.Helper()
	g, err := metrics.NodePoolUsage.GetMetricWithLabelValues(pool, resource)
	if err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// The usage gauges follow node updates, refreshed when usage is next read
// rather than on every update (which made loading N nodes cost N²).
func TestUsageGaugesFollowUpdates(t *testing.T) {
	c := newCluster(clocktesting.NewFakeClock(time.Now()))
	c.UpdateNodeClaim(nodeClaim("g1", "gauges", "kwok://g1"))
	c.UpdateNode(node("g1", "gauges", "kwok://g1", true))
	c.NodePoolUsage("gauges")
	assert.Equal(t, 4.0, usageGauge(t, "gauges", "cpu"))

	c.UpdateNodeClaim(nodeClaim("g2", "gauges", "kwok://g2"))
	c.UpdateNode(node("g2", "gauges", "kwok://g2", true))
	c.NodePoolResources("gauges")
	assert.Equal(t, 8.0, usageGauge(t, "gauges", "cpu"))

	c.DeleteNode("g2")
	c.DeleteNodeClaim("g2")
	c.NodePoolsUsage()
	assert.Equal(t, 4.0, usageGauge(t, "gauges", "cpu"))
}

// BenchmarkLoadNodes feeds a cluster state as its informers do at start-up:
// one NodeClaim and one Node update per machine.
func BenchmarkLoadNodes(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for range b.N {
				c := newCluster(clocktesting.NewFakeClock(time.Now()))
				for i := range n {
					name, id := fmt.Sprintf("n%d", i), fmt.Sprintf("kwok://n%d", i)
					c.UpdateNodeClaim(nodeClaim(name, fmt.Sprintf("pool-%d", i%20), id))
					c.UpdateNode(node(name, fmt.Sprintf("pool-%d", i%20), id, true))
				}
			}
		})
	}
}
