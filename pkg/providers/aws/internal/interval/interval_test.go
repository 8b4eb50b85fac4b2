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
