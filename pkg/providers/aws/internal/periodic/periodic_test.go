package periodic_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
)

// TestLoop: passes run every interval, a failure is logged, a panic is
// recovered and logged, and the loop carries on until its context ends. It
// runs in a synctest bubble, so four intervals are exactly four passes.
func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var passes, logged atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		l := periodic.Loop{
			Interval: 10 * time.Second, Failure: "pass failed",
			Log: funcr.New(func(_, _ string) { logged.Add(1) }, funcr.Options{}),
			Pass: func(context.Context) error {
				switch passes.Add(1) {
				case 1:
					return errors.New("first fails")
				case 2:
					panic("second panics")
				}
				return nil
			},
		}
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()
		time.Sleep(40*time.Second + time.Millisecond)
		synctest.Wait()
		assert.Equal(t, int32(4), passes.Load(), "a pass every interval; the loop survives a failure and a panic")
		cancel()
		require.NoError(t, <-done)
		assert.Equal(t, int32(2), logged.Load(), "the failure and the panic are logged")
	})
}

// TestImmediately: a pass runs at start only when Immediately says so;
// otherwise the first one comes after the interval.
func TestImmediately(t *testing.T) {
	for _, immediately := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			var passes atomic.Int32
			ctx, cancel := context.WithCancel(context.Background())
			l := periodic.Loop{Interval: time.Hour, Immediately: immediately, Log: logr.Discard(),
				Pass: func(context.Context) error { passes.Add(1); return nil }}
			done := make(chan error)
			go func() { done <- l.Run(ctx) }()
			synctest.Wait()
			want := int32(0)
			if immediately {
				want = 1
			}
			assert.Equal(t, want, passes.Load(), "passes at start, Immediately=%v", immediately)
			time.Sleep(time.Hour)
			synctest.Wait()
			assert.Equal(t, want+1, passes.Load(), "a pass after the interval")
			cancel()
			require.NoError(t, <-done)
		})
	}
}

func TestSafe(t *testing.T) {
	err := periodic.Safe(context.Background(), func(context.Context) error { panic("boom") })
	require.ErrorContains(t, err, "panic: boom")
	require.NoError(t, periodic.Safe(context.Background(), func(context.Context) error { return nil }))
}
