package interruption

import (
	"context"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/karpenter-go/karpenter/pkg/cloudprovider"
	"github.com/karpenter-go/karpenter/pkg/metrics"
)

// Learner defaults.
const (
	DefaultLearnerHalfLife = 6 * time.Hour
	DefaultLearnerMaxHold  = 2 * time.Hour
	// DefaultLearnerRefresh is how often held offerings are marked again.
	DefaultLearnerRefresh = 30 * time.Second
	// forgetScore is the decayed count below which an offering is
	// forgotten (and its rate series removed).
	forgetScore = 0.05
)

// LearnerOptions tune a Learner. The zero value is the defaults.
type LearnerOptions struct {
	// HalfLife is how fast an interruption is forgotten: its weight halves
	// every HalfLife. Default 6h.
	HalfLife time.Duration
	// BaseHold is how long a first interruption keeps the offering out;
	// each further recent interruption doubles it. Default: the cache's TTL
	// (cloudprovider.DefaultUnavailableTTL, 3m), so one interruption behaves
	// exactly as upstream.
	BaseHold time.Duration
	// MaxHold caps the hold. Default 2h.
	MaxHold time.Duration
	// CacheTTL is how long one MarkUnavailable lasts in the cache. Default
	// cloudprovider.DefaultUnavailableTTL.
	CacheTTL time.Duration
	// Refresh is how often held offerings are marked again. Default 30s.
	Refresh time.Duration
	// Clock is the real one when nil.
	Clock clock.Clock
}

type offeringScore struct {
	score     float64   // decayed interruption count at updated
	updated   time.Time // when score was last decayed
	holdUntil time.Time // keep marking the offering until then
}

// Learner learns how often each spot offering (instance type × zone) is
// interrupted and keeps often-interrupted offerings out of launches for
// longer than the insufficient-capacity cache's 3 minutes. Its memory of an
// offering is an exponentially decaying count of its interruptions (weight
// halving every HalfLife); after an interruption the offering is held for
// BaseHold × 2^(round(count)−1), capped at MaxHold. It holds an offering by marking
// it in the shared cache again every Refresh while the hold lasts, so the
// cache stays the one place launches consult. The count, as a rate per
// hour, is the gauge karpenter_interruption_offering_interruptions_per_hour.
// It is safe for concurrent use.
type Learner struct {
	cache UnavailableOfferings
	opts  LearnerOptions

	mu     sync.Mutex
	scores map[cloudprovider.OfferingKey]*offeringScore
}

// NewLearner builds a learner marking cache.
func NewLearner(cache UnavailableOfferings, opts LearnerOptions) *Learner {
	if opts.HalfLife <= 0 {
		opts.HalfLife = DefaultLearnerHalfLife
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = cloudprovider.DefaultUnavailableTTL
	}
	if opts.BaseHold <= 0 {
		opts.BaseHold = opts.CacheTTL
	}
	if opts.MaxHold < opts.BaseHold {
		opts.MaxHold = max(DefaultLearnerMaxHold, opts.BaseHold)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultLearnerRefresh
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Learner{cache: cache, opts: opts, scores: map[cloudprovider.OfferingKey]*offeringScore{}}
}

// decay brings s's score to now.
func (l *Learner) decay(s *offeringScore, now time.Time) {
	if dt := now.Sub(s.updated); dt > 0 {
		s.score *= math.Exp2(-dt.Hours() / l.opts.HalfLife.Hours())
		s.updated = now
	}
}

// ratePerHour turns a decayed count into the rate it stands for: a steady
// rate r per hour settles at a count of r × HalfLife / ln 2.
func (l *Learner) ratePerHour(score float64) float64 {
	return score * math.Ln2 / l.opts.HalfLife.Hours()
}

// Hold is how long an offering with this decayed count (the new
// interruption included) is kept out of launches.
func (l *Learner) Hold(score float64) time.Duration {
	if score < 1 {
		score = 1
	}
	// The count is rounded: each interruption still remembered at more
	// than half its weight doubles the hold. The exponent is capped so the
	// float stays far from overflow.
	d := float64(l.opts.BaseHold) * math.Exp2(math.Min(math.Round(score)-1, 32))
	if d > float64(l.opts.MaxHold) {
		return l.opts.MaxHold
	}
	return time.Duration(d)
}

// Observe records an interruption of the offering and marks it.
func (l *Learner) Observe(key cloudprovider.OfferingKey) {
	now := l.opts.Clock.Now()
	l.mu.Lock()
	s := l.scores[key]
	if s == nil {
		s = &offeringScore{updated: now}
		l.scores[key] = s
	}
	l.decay(s, now)
	s.score++
	if until := now.Add(l.Hold(s.score)); until.After(s.holdUntil) {
		s.holdUntil = until
	}
	rate := l.ratePerHour(s.score)
	l.mu.Unlock()
	metrics.InterruptionOfferingInterruptionsPerHour.WithLabelValues(key.InstanceType, key.Zone, key.CapacityType).Set(rate)
	if l.cache != nil {
		l.cache.MarkUnavailable(key)
	}
}

// Score is the offering's decayed interruption count and the end of its
// hold, for tests and logs.
func (l *Learner) Score(key cloudprovider.OfferingKey) (float64, time.Time) {
	now := l.opts.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.scores[key]
	if s == nil {
		return 0, time.Time{}
	}
	l.decay(s, now)
	return s.score, s.holdUntil
}

// Refresh marks again every offering whose hold outlasts its current cache
// entry, updates the rate gauge and forgets offerings whose count decayed
// away. A mark lasts CacheTTL, so marking while now+CacheTTL is before the
// hold's end makes the offering available again within Refresh of it.
func (l *Learner) Refresh() {
	now := l.opts.Clock.Now()
	var mark []cloudprovider.OfferingKey
	rates := map[cloudprovider.OfferingKey]float64{}
	l.mu.Lock()
	for key, s := range l.scores {
		l.decay(s, now)
		if s.score < forgetScore && !s.holdUntil.After(now) {
			delete(l.scores, key)
			metrics.InterruptionOfferingInterruptionsPerHour.DeleteLabelValues(key.InstanceType, key.Zone, key.CapacityType)
			continue
		}
		rates[key] = l.ratePerHour(s.score)
		if now.Add(l.opts.CacheTTL).Before(s.holdUntil) {
			mark = append(mark, key)
		}
	}
	l.mu.Unlock()
	for key, r := range rates {
		metrics.InterruptionOfferingInterruptionsPerHour.WithLabelValues(key.InstanceType, key.Zone, key.CapacityType).Set(r)
	}
	if l.cache != nil {
		for _, key := range mark {
			l.cache.MarkUnavailable(key)
		}
	}
}

// Run refreshes every Refresh (wall time; tests call Refresh) until ctx is
// done.
func (l *Learner) Run(ctx context.Context) error {
	t := time.NewTicker(l.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			l.Refresh()
		}
	}
}
