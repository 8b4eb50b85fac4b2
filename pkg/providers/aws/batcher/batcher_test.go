package batcher_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/pkg/providers/aws/batcher"
)

// recorder is an Exec that records each call's inputs and answers each
// input with its own value and the call's size.
type recorder struct {
	mu    sync.Mutex
	calls [][]string
	delay time.Duration
}

func (r *recorder) exec(_ context.Context, in []string) []batcher.Result[string] {
	time.Sleep(r.delay)
	r.mu.Lock()
	r.calls = append(r.calls, append([]string(nil), in...))
	r.mu.Unlock()
	out := make([]batcher.Result[string], len(in))
	for i, s := range in {
		out[i].Out = fmt.Sprintf("%s/%d", s, len(in))
	}
	return out
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, c := range r.calls {
		out = append(out, len(c))
	}
	sort.Ints(out)
	return out
}

// The tests run in synctest bubbles: the windows are timers on the
// bubble's fake clock, so an arrival 5ms after another is 5ms after it
// however loaded the machine is, and a bucket goroutine that outlives its
// bucket fails the test (the bubble never empties).

// keyOf buckets "a1", "a2" together and apart from "b1".
func keyOf(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty request")
	}
	return s[:1], nil
}

func TestBatcherWindows(t *testing.T) {
	type arrival struct {
		after time.Duration // since the previous request was sent
		in    string
	}
	cases := []struct {
		name      string
		maxItems  int
		arrivals  []arrival
		wantSizes []int
	}{
		{"one request is a call of one", 0, []arrival{{0, "a1"}}, []int{1}},
		{"requests within the idle window merge", 0,
			[]arrival{{0, "a1"}, {5 * time.Millisecond, "a2"}, {5 * time.Millisecond, "a3"}}, []int{3}},
		{"different hashes never merge", 0, []arrival{{0, "a1"}, {0, "b1"}, {0, "a2"}}, []int{1, 2}},
		{"an idle gap closes the window", 0, []arrival{{0, "a1"}, {120 * time.Millisecond, "a2"}}, []int{1, 1}},
		{"the max timeout closes a busy window", 0, func() []arrival {
			// A request every 20ms keeps the idle window open; the 200ms
			// maximum closes it.
			var out []arrival
			for i := 0; i < 16; i++ {
				out = append(out, arrival{20 * time.Millisecond, fmt.Sprintf("a%d", i)})
			}
			return out
		}(), nil},
		{"max items closes the window at once", 2, []arrival{{0, "a1"}, {0, "a2"}, {0, "a3"}}, []int{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				b := batcher.New(batcher.Options[string, string]{
					IdleTimeout: 50 * time.Millisecond, MaxTimeout: 200 * time.Millisecond, MaxItems: tc.maxItems,
					Hash: keyOf, Exec: rec.exec,
				})
				var wg sync.WaitGroup
				results := make([]string, len(tc.arrivals))
				for i, a := range tc.arrivals {
					time.Sleep(a.after)
					wg.Add(1)
					go func() {
						defer wg.Done()
						out, err := b.Add(context.Background(), a.in)
						assert.NoError(t, err)
						results[i] = out
					}()
					// Keep the arrival order of simultaneous requests.
					synctest.Wait()
				}
				wg.Wait()
				for i, a := range tc.arrivals {
					assert.Regexp(t, "^"+a.in+"/[0-9]+$", results[i], "every caller gets its own answer")
				}
				if tc.wantSizes != nil {
					assert.Equal(t, tc.wantSizes, rec.sizes())
					return
				}
				sizes := rec.sizes()
				assert.GreaterOrEqual(t, len(sizes), 2, "the max timeout split the stream: %v", sizes)
				assert.Less(t, len(sizes), len(tc.arrivals), "but it was batched: %v", sizes)
			})
		})
	}
}

// TestBatcherHoldWhileBusy: with Exec slower than the gaps between
// arrivals, a request that arrives while a call of its key runs waits for
// the first running call to return (within MaxTimeout) and gathers the
// requests behind it; without the hold each gap opens a call of its own.
// Another key is not held by the running call. The first bucket to go idle
// while calls run (the rest of a burst whose first part went in the
// running call) is not held: it goes as soon as its own window closes,
// beside that call, and only one per busy spell.
func TestBatcherHoldWhileBusy(t *testing.T) {
	type arrival struct {
		at time.Duration // since the test began
		in string
	}
	// a1 opens a window at 0 that closes at 50ms; its call runs 250ms.
	// a2..a5 arrive 60ms apart (beyond the 50ms idle window) while it
	// runs.
	trickle := []arrival{{0, "a1"}, {60 * time.Millisecond, "b1"}, {60 * time.Millisecond, "a2"},
		{120 * time.Millisecond, "a3"}, {180 * time.Millisecond, "a4"}, {240 * time.Millisecond, "a5"}}
	cases := []struct {
		name      string
		hold      bool
		arrivals  []arrival
		wantSizes []int
		// wantDone is when each request's answer came back.
		wantDone map[string]time.Duration
	}{
		{"without the hold each gap is a call", false, trickle, []int{1, 1, 1, 1, 1, 1}, nil},
		// a2's window (60-110ms) is the spell's first to go idle: its call
		// runs 110-360ms beside a1's; a3..a5 gather until a1's call
		// returns at 300ms, not a2's at 360ms.
		{"held, the arrivals gather behind the running calls", true, trickle, []int{1, 1, 1, 3},
			map[string]time.Duration{"a1": 300 * time.Millisecond, "a2": 360 * time.Millisecond, "a3": 550 * time.Millisecond, "a5": 550 * time.Millisecond}},
		// a2 comes 70ms after a1's window closed, during its call: its
		// own call runs 170-420ms (held, 300-550ms).
		{"the rest of a burst goes beside its first call", true,
			[]arrival{{0, "a1"}, {120 * time.Millisecond, "a2"}}, []int{1, 1},
			map[string]time.Duration{"a1": 300 * time.Millisecond, "a2": 420 * time.Millisecond}},
		// a3 opens its window 120ms in, once a2's went: it is held until
		// a1's call returns at 300ms, and a4 joins it.
		{"one bucket per spell goes early", true,
			[]arrival{{0, "a1"}, {60 * time.Millisecond, "a2"}, {120 * time.Millisecond, "a3"}, {200 * time.Millisecond, "a4"}},
			[]int{1, 1, 2},
			map[string]time.Duration{"a2": 360 * time.Millisecond, "a3": 550 * time.Millisecond, "a4": 550 * time.Millisecond}},
		// a3's window goes at a1's return (300ms) beside a2's call; a4
		// opens the next window at 320ms, which a2's return (360ms) does
		// not release (it was not yet idle then): it is held until a3's
		// call returns at 550ms. One return, one released window.
		{"each return releases one window", true,
			[]arrival{{0, "a1"}, {60 * time.Millisecond, "a2"}, {120 * time.Millisecond, "a3"}, {320 * time.Millisecond, "a4"}},
			[]int{1, 1, 1, 1},
			map[string]time.Duration{"a3": 550 * time.Millisecond, "a4": 800 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{delay: 250 * time.Millisecond}
				b := batcher.New(batcher.Options[string, string]{
					IdleTimeout: 50 * time.Millisecond, MaxTimeout: time.Second, HoldWhileBusy: tc.hold,
					Hash: keyOf, Exec: rec.exec,
				})
				begin := time.Now()
				var mu sync.Mutex
				done := map[string]time.Duration{}
				var wg sync.WaitGroup
				for _, a := range tc.arrivals {
					time.Sleep(begin.Add(a.at).Sub(time.Now()))
					wg.Add(1)
					go func() {
						defer wg.Done()
						out, err := b.Add(context.Background(), a.in)
						assert.NoError(t, err)
						assert.Regexp(t, "^"+a.in+"/[0-9]+$", out)
						mu.Lock()
						done[a.in] = time.Since(begin)
						mu.Unlock()
					}()
					synctest.Wait()
				}
				wg.Wait()
				assert.Equal(t, tc.wantSizes, rec.sizes())
				for in, want := range tc.wantDone {
					assert.Equal(t, want, done[in], "%s answered at", in)
				}
			})
		})
	}
}

func TestBatcherCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := batcher.New(batcher.Options[string, string]{
			IdleTimeout: 100 * time.Millisecond, MaxTimeout: time.Second, Hash: keyOf, Exec: rec.exec,
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := b.Add(ctx, "a-cancelled")
			done <- err
		}()
		time.Sleep(10 * time.Millisecond)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled, "the caller returns at once")
		out, err := b.Add(context.Background(), "a-kept")
		require.NoError(t, err)
		assert.Equal(t, "a-kept/1", out, "the cancelled request left the bucket before it was sent")

		// A request whose context has already ended is never queued.
		_, err = b.Add(ctx, "a-late")
		require.ErrorIs(t, err, context.Canceled)
		// Nor one that does not hash.
		_, err = b.Add(context.Background(), "")
		require.Error(t, err)
		assert.Equal(t, []int{1}, rec.sizes())
	})
}

func TestBatcherCancelWhileExecuting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{delay: 100 * time.Millisecond}
		b := batcher.New(batcher.Options[string, string]{
			IdleTimeout: 10 * time.Millisecond, MaxTimeout: time.Second, Hash: keyOf, Exec: rec.exec,
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(50 * time.Millisecond); cancel() }()
		_, err := b.Add(ctx, "a1")
		require.ErrorIs(t, err, context.Canceled)
		// The call was on the wire (from 10ms to 110ms): it completes
		// without its caller.
		synctest.Wait()
		assert.Empty(t, rec.sizes(), "the call is still on the wire")
		time.Sleep(60 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []int{1}, rec.sizes())
	})
}

func TestBatcherExecFailures(t *testing.T) {
	cases := []struct {
		name string
		exec func(context.Context, []string) []batcher.Result[string]
		want string
	}{
		{"a panic fails every caller", func(context.Context, []string) []batcher.Result[string] { panic("boom") }, "panicked: boom"},
		{"too few results fail the rest", func(context.Context, []string) []batcher.Result[string] { return nil }, "0 results for 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := batcher.New(batcher.Options[string, string]{
				IdleTimeout: 20 * time.Millisecond, MaxTimeout: time.Second, Hash: keyOf, Exec: tc.exec,
			})
			var wg sync.WaitGroup
			for _, in := range []string{"a1", "a2"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := b.Add(context.Background(), in)
					assert.ErrorContains(t, err, tc.want)
				}()
			}
			wg.Wait()
		})
	}
}

// TestBatcherConcurrentUse hammers one batcher from many goroutines (run
// with -race) and checks every request is answered once; the bubble checks
// that no goroutine outlives its bucket.
func TestBatcherConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := batcher.New(batcher.Options[string, string]{
			IdleTimeout: 5 * time.Millisecond, MaxTimeout: 50 * time.Millisecond, MaxItems: 7, Hash: keyOf, Exec: rec.exec,
		})
		var wg sync.WaitGroup
		for i := 0; i < 400; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				if i%10 == 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(i%7)*time.Millisecond)
					defer cancel()
				}
				in := fmt.Sprintf("%c%d", 'a'+i%3, i)
				out, err := b.Add(ctx, in)
				if err != nil {
					assert.ErrorIs(t, err, context.DeadlineExceeded)
					return
				}
				assert.Regexp(t, "^"+in+"/[1-7]$", out)
			}()
		}
		wg.Wait()
		total := 0
		for _, n := range rec.sizes() {
			total += n
		}
		assert.LessOrEqual(t, total, 400)
		assert.GreaterOrEqual(t, total, 360, "only the requests with a deadline may be dropped")
	})
}

// TestBatcherObserve: each executed batch reports its size and how long its
// window stayed open (at least the idle timeout after the last request);
// a batch every caller left is not reported.
func TestBatcherObserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct {
			window time.Duration
			size   int
		}
		var mu sync.Mutex
		var got []seen
		rec := &recorder{}
		b := batcher.New(batcher.Options[string, string]{
			IdleTimeout: 30 * time.Millisecond, MaxTimeout: time.Second, Hash: keyOf, Exec: rec.exec,
			Observe: func(w time.Duration, n int) { mu.Lock(); got = append(got, seen{w, n}); mu.Unlock() },
		})
		var wg sync.WaitGroup
		for _, in := range []string{"a1", "a2", "a3"} {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = b.Add(context.Background(), in) }()
		}
		wg.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(5 * time.Millisecond); cancel() }()
		_, err := b.Add(ctx, "b1")
		require.Error(t, err)
		time.Sleep(60 * time.Millisecond) // the abandoned window closes unreported
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, got, 1)
		assert.Equal(t, 3, got[0].size)
		assert.Equal(t, 30*time.Millisecond, got[0].window, "the idle timeout after the last request")
	})
}
