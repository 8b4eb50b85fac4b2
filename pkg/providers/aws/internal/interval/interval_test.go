package interval

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestGateDue(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var g Gate
	for _, step := range []struct {
		at   time.Duration
		want bool
	}{
		{0, true},                        // the first tick runs
		{time.Minute, false},             // within the interval
		{time.Hour - time.Second, false}, // just before it ends
		{time.Hour, true},                // exactly at the interval
		{time.Hour + time.Minute, false}, // the interval restarts from the last due tick
		{3 * time.Hour, true},
	} {
		assert.Equal(t, step.want, g.Due(start.Add(step.at), time.Hour), "tick at %s", step.at)
	}
}

// TestGateRetryAt: a failed refresh asks for a retry before the interval
// ends; the retry is due once, then the interval counts from it.
func TestGateRetryAt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var g Gate
	assert.True(t, g.Due(start, time.Hour))
	g.RetryAt(start.Add(5 * time.Minute))
	assert.False(t, g.Due(start.Add(4*time.Minute), time.Hour), "before the retry time")
	assert.True(t, g.Due(start.Add(5*time.Minute), time.Hour), "at the retry time")
	assert.False(t, g.Due(start.Add(10*time.Minute), time.Hour), "the retry is due once")
	assert.False(t, g.Due(start.Add(time.Hour), time.Hour), "the interval restarts from the retry")
	assert.True(t, g.Due(start.Add(time.Hour+5*time.Minute), time.Hour))
}
