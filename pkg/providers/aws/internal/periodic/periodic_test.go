package periodic_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/internal/periodic"
)

// TestLoop: passes run every interval, a failure is logged, a panic is
// recovered and logged, and the loop carries on until its context ends.
func TestLoop(t *testing.T) {
	var passes, logged atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	l := periodic.Loop{
		Interval: 10 * time.Millisecond, Failure: "pass failed",
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
	require.Eventually(t, func() bool { return passes.Load() >= 4 }, 5*time.Second, time.Millisecond, "the loop survives a failure and a panic")
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, int32(2), logged.Load(), "the failure and the panic are logged")
}

// TestImmediately: with an interval far longer than the test, a pass runs
// only when Immediately says so.
func TestImmediately(t *testing.T) {
	for _, immediately := range []bool{true, false} {
		ran := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		l := periodic.Loop{Interval: time.Hour, Immediately: immediately, Log: logr.Discard(),
			Pass: func(context.Context) error { ran <- struct{}{}; cancel(); return nil }}
		done := make(chan error)
		go func() { done <- l.Run(ctx) }()
		if immediately {
			<-ran
		} else {
			select {
			case <-ran:
				t.Fatal("a pass ran before the first interval")
			case <-time.After(50 * time.Millisecond):
			}
			cancel()
		}
		require.NoError(t, <-done)
	}
}

func TestSafe(t *testing.T) {
	err := periodic.Safe(context.Background(), func(context.Context) error { panic("boom") })
	require.ErrorContains(t, err, "panic: boom")
	require.NoError(t, periodic.Safe(context.Background(), func(context.Context) error { return nil }))
}
