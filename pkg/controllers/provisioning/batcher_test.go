package provisioning

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// waiter runs Wait in the background, inside a synctest bubble: the
// bubble's clock moves only when every goroutine in it is blocked, so a
// window's timing is exact and a loaded machine cannot stretch it.
type waiter struct {
	t    *testing.T
	done chan bool
}

func startWait(t *testing.T, b *Batcher) *waiter {
	w := &waiter{t: t, done: make(chan bool, 1)}
	go func() { w.done <- b.Wait(context.Background()) }()
	return w
}

// settle lets Wait run until it returns or blocks on its timer, and
// reports (result, true) when it returned.
func (w *waiter) settle() (bool, bool) {
	synctest.Wait()
	select {
	case r := <-w.done:
		return r, true
	default:
		return false, false
	}
}

func (w *waiter) requireBlocked() {
	w.t.Helper()
	_, returned := w.settle()
	require.False(w.t, returned, "window closed too early")
}

func (w *waiter) requireReturned(want bool) {
	w.t.Helper()
	got, returned := w.settle()
	require.True(w.t, returned, "window should have closed")
	require.Equal(w.t, want, got)
}

func TestBatcher(t *testing.T) {
	step := func(d time.Duration) func(*Batcher) {
		return func(*Batcher) { time.Sleep(d) }
	}
	trigger := func(uid string) func(*Batcher) {
		return func(b *Batcher) { b.Trigger(types.UID(uid)) }
	}
	type action struct {
		do      func(*Batcher)
		blocked bool // after the action, Wait must still be blocked
	}
	tests := []struct {
		name    string
		actions []action
		want    bool
	}{
		{"no trigger gives up after a second", []action{
			{step(999 * time.Millisecond), true},
			{step(time.Millisecond), false},
		}, false},
		{"closes after the idle duration", []action{
			{trigger("a"), true},
			{step(999 * time.Millisecond), true},
			{step(time.Millisecond), false},
		}, true},
		{"a new pod extends the window", []action{
			{trigger("a"), true},
			{step(600 * time.Millisecond), true},
			{trigger("b"), true},
			{step(600 * time.Millisecond), true}, // 1.2s after a, 0.6s after b
			{step(400 * time.Millisecond), false},
		}, true},
		{"a duplicate pod does not extend the window", []action{
			{trigger("a"), true},
			{step(600 * time.Millisecond), true},
			{trigger("a"), true},
			{step(400 * time.Millisecond), false},
		}, true},
		{"closes at the max duration despite steady triggers", append(append([]action{}, func() []action {
			var out []action
			for i := range 19 { // a new pod every 500ms for 9.5s
				out = append(out, action{trigger(string(rune('a' + i))), true}, action{step(500 * time.Millisecond), true})
			}
			return out
		}()...), action{trigger("z"), true}, action{step(500 * time.Millisecond), false}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBatcher(clock.RealClock{}, time.Second, 10*time.Second)
				w := startWait(t, b)
				w.requireBlocked()
				for i, a := range tt.actions {
					a.do(b)
					if a.blocked {
						w.requireBlocked()
					} else {
						require.Equal(t, len(tt.actions)-1, i, "only the last action may close the window")
						w.requireReturned(tt.want)
					}
				}
			})
		})
	}
}

func TestBatcherStartsFreshWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBatcher(clock.RealClock{}, time.Second, 10*time.Second)
		b.Trigger("a") // before anyone waits: the window is already open
		w := startWait(t, b)
		w.requireBlocked()
		time.Sleep(time.Second)
		w.requireReturned(true)

		// The same pod, still pending, opens the next window.
		b.Trigger("a")
		w = startWait(t, b)
		w.requireBlocked()
		time.Sleep(time.Second)
		w.requireReturned(true)
	})
}

func TestBatcherContextCancel(t *testing.T) {
	b := NewBatcher(clock.RealClock{}, time.Second, 10*time.Second)
	b.Trigger("a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, b.Wait(ctx))
}
