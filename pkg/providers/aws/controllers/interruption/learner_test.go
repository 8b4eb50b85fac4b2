package interruption_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
	"github.com/karpenter-go/karpenter/pkg/providers/aws/controllers/interruption"
)

func TestLearnerHold(t *testing.T) {
	l := interruption.NewLearner(nil, interruption.LearnerOptions{})
	for _, tc := range []struct {
		score float64
		want  time.Duration
	}{
		{0, 3 * time.Minute}, {1, 3 * time.Minute}, {1.4, 3 * time.Minute}, {1.6, 6 * time.Minute}, {2, 6 * time.Minute},
		{3, 12 * time.Minute}, {5, 48 * time.Minute}, {6, 96 * time.Minute}, {7, 2 * time.Hour}, {1e9, 2 * time.Hour},
	} {
		assert.Equal(t, tc.want, l.Hold(tc.score), "score %v", tc.score)
	}
}

// The learner holds an often-interrupted offering past the cache's TTL by
// marking it again, lets it go when the hold ends, and forgets it as its
// count decays.
func TestLearnerHoldsAndDecays(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	cache := cloudprovider.NewUnavailableOfferings(clk, 0)
	l := interruption.NewLearner(cache, interruption.LearnerOptions{Clock: clk, HalfLife: time.Hour})
	key := cloudprovider.OfferingKey{InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: "spot"}
	rate := metrics.InterruptionOfferingInterruptionsPerHour.WithLabelValues(key.InstanceType, key.Zone, key.CapacityType)

	// One interruption: exactly the cache's 3 minutes, as upstream.
	l.Observe(key)
	assert.True(t, cache.IsUnavailable(key))
	clk.Step(2 * time.Minute)
	l.Refresh()
	clk.Step(90 * time.Second)
	l.Refresh()
	assert.False(t, cache.IsUnavailable(key), "one interruption holds no longer than the cache")

	// Two more in quick succession: count ≈ 3, hold 12 minutes.
	l.Observe(key)
	l.Observe(key)
	score, until := l.Score(key)
	assert.InDelta(t, 2.96, score, 0.01) // 1 × 2^(−3.5m/1h) + 2
	assert.Equal(t, clk.Now().Add(12*time.Minute), until)
	assert.InDelta(t, score*0.6931, gauge(t, rate), 0.01, "rate per hour with a 1h half-life")
	for elapsed := time.Duration(0); elapsed < 11*time.Minute; elapsed += 30 * time.Second {
		clk.Step(30 * time.Second)
		l.Refresh()
		assert.True(t, cache.IsUnavailable(key), "held at +%v", elapsed+30*time.Second)
	}
	clk.Step(90 * time.Second)
	l.Refresh()
	assert.False(t, cache.IsUnavailable(key), "released once the hold is over")

	// Half-lives later the offering is forgotten and its series removed.
	clk.Step(6 * time.Hour)
	l.Refresh()
	score, _ = l.Score(key)
	assert.Zero(t, score)
	assert.Equal(t, 0, testutilCount(key))
}

// testutilCount is how many rate series the key has (0 once forgotten).
func testutilCount(key cloudprovider.OfferingKey) int {
	if metrics.InterruptionOfferingInterruptionsPerHour.DeleteLabelValues(key.InstanceType, key.Zone, key.CapacityType) {
		return 1
	}
	return 0
}
