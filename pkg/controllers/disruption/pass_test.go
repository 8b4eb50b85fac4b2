package disruption

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextPass(t *testing.T) {
	c := &Controller{opts: Options{PollPeriod: 10 * time.Second}}
	for _, tt := range []struct {
		name string
		r    passResult
		err  error
		want time.Duration
	}{
		{"nothing to do: the poll period", passResult{}, nil, 10 * time.Second},
		{"a command started: at once", passResult{started: true}, nil, 0},
		{"a command abandoned by validation: at once", passResult{abandoned: true}, nil, 0},
		{"cluster state not synced: a second", passResult{}, errNotSynced, time.Second},
		{"an error: the poll period, even after a start", passResult{started: true}, errors.New("boom"), 10 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, c.nextPass(tt.r, tt.err))
		})
	}
}

// TestRunParallel: drain's writes all run, at most drainWorkers at once,
// and every failure is reported, not only the first. In a synctest bubble,
// "no more start" is checked once every goroutine is blocked, not after a
// guess at how long a busy machine needs.
func TestRunParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		running, peak, ran := 0, 0, 0
		release := make(chan struct{})
		var jobs []func() error
		for i := range 3 * drainWorkers {
			jobs = append(jobs, func() error {
				mu.Lock()
				running++
				ran++
				peak = max(peak, running)
				mu.Unlock()
				<-release
				mu.Lock()
				running--
				mu.Unlock()
				if i%10 == 0 {
					return fmt.Errorf("job %d failed", i)
				}
				return nil
			})
		}
		done := make(chan error, 1)
		go func() { done <- runParallel(jobs) }()
		// The first drainWorkers block side by side; no more start.
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, drainWorkers, running, "drainWorkers jobs run at once")
		mu.Unlock()
		close(release)
		err := <-done
		assert.Equal(t, 3*drainWorkers, ran)
		assert.Equal(t, drainWorkers, peak)
		require.Error(t, err)
		for i := 0; i < 3*drainWorkers; i += 10 {
			assert.ErrorContains(t, err, fmt.Sprintf("job %d failed", i))
		}
	})
}
