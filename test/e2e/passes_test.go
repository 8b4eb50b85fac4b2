package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// passCount is how many disruption passes the controller behind port has
// made: a pass always decides Emptiness first, so the count of Emptiness's
// decision_evaluation_duration_seconds histogram counts passes. -1 when the
// metrics cannot be read.
func passCount(ctx context.Context, port int) float64 {
	samples, err := scrapeMetrics(ctx, port)
	if err != nil {
		return -1
	}
	for _, s := range samples {
		if s.name == "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count" && s.labels["consolidation_type"] == "empty" {
			return s.value
		}
	}
	return 0
}

// neverForPasses asserts that cond stays false while the controller makes
// passes more complete disruption passes: the window ends once the pass
// after them has started, so that the last one's validation delay and the
// commands it started lie inside it. "Nothing happens" is then a statement
// about what the controller decided, not about how long a test waited: a
// controller that makes no passes (a loaded machine) fails the assertion at
// timeout instead of passing it vacuously.
func neverForPasses(t *testing.T, ctx context.Context, port, passes int, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	start := passCount(ctx, port)
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			t.Fatalf("during %d disruption passes: %s", passes, fmt.Sprintf(msg, args...))
		}
		now := passCount(ctx, port)
		if start >= 0 && now >= start+float64(passes)+1 {
			return
		}
		if start < 0 {
			start = now
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller made %v of %d disruption passes in %s; the window proves nothing: %s", now-start, passes+1, timeout, fmt.Sprintf(msg, args...))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
