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
// arrivals, once a call of the key has returned, a request that arrives
// while another runs waits for the next running call to return (within
// MaxTimeout) and gathers the requests behind it; without the hold each
// gap opens a call of its own. Another key is not held by the running
// call. Before any call of the busy spell has returned, every bucket goes
// as soon as its own window closes, beside the running calls: it is the
// rest of the burst whose first part went in them.
func TestBatcherHoldWhileBusy(t *testing.T) {
	type arrival struct {
		at time.Duration // since the test began
		in string
	}
	// a1's window closes at 50ms and its call runs to 300ms; a2's runs
	// 150-400ms. a3..a5 and b1 come after a1's return, 60ms apart
	// (beyond the 50ms idle window), while a2's runs.
	trickle := []arrival{{0, "a1"}, {100 * time.Millisecond, "a2"}, {310 * time.Millisecond, "a3"},
		{320 * time.Millisecond, "b1"}, {370 * time.Millisecond, "a4"}, {430 * time.Millisecond, "a5"}}
	cases := []struct {
		name      string
		hold      bool
		arrivals  []arrival
		wantSizes []int
		// wantDone is when each request's answer came back.
		wantDone map[string]time.Duration
	}{
		{"without the hold each gap is a call", false, trickle, []int{1, 1, 1, 1, 1, 1}, nil},
		// a3's window (310-360ms) is held until a2's call returns at
		// 400ms, and a4 joins it; a5's window, opened after that return,
		// waits for the next, a3's call at 650ms, though a2's return
		// ended the calls that were running when a3 was held. b1 goes at
		// once.
		{"held after a return, the arrivals gather behind the running calls", true, trickle, []int{1, 1, 1, 1, 2},
			map[string]time.Duration{"a1": 300 * time.Millisecond, "a2": 400 * time.Millisecond, "a3": 650 * time.Millisecond,
				"a4": 650 * time.Millisecond, "a5": 900 * time.Millisecond, "b1": 620 * time.Millisecond}},
		// a2 comes 70ms after a1's window closed, during its call: its
		// own call runs 170-420ms (held, 300-550ms).
		{"the rest of a burst goes beside its first call", true,
			[]arrival{{0, "a1"}, {120 * time.Millisecond, "a2"}}, []int{1, 1},
			map[string]time.Duration{"a1": 300 * time.Millisecond, "a2": 420 * time.Millisecond}},
		// Every window that closes before a1's call returns at 300ms goes.
		{"until a call returns, every window goes", true,
			[]arrival{{0, "a1"}, {60 * time.Millisecond, "a2"}, {120 * time.Millisecond, "a3"}, {200 * time.Millisecond, "a4"}},
			[]int{1, 1, 1, 1},
			map[string]time.Duration{"a2": 360 * time.Millisecond, "a3": 420 * time.Millisecond, "a4": 500 * time.Millisecond}},
		// Calls run 50-300 (a1), 150-400 (a2) and 250-500ms (a3). a4's
		// window is held from 360ms and goes at a2's return (400ms) with
		// a5; a6 opens the next window at 410ms, which that return does
		// not release (it was not yet open): it goes at a3's return at
		// 500ms. One return, one released window.
		{"each return releases one window", true,
			[]arrival{{0, "a1"}, {100 * time.Millisecond, "a2"}, {200 * time.Millisecond, "a3"}, {310 * time.Millisecond, "a4"},
				{380 * time.Millisecond, "a5"}, {410 * time.Millisecond, "a6"}},
			[]int{1, 1, 1, 1, 2},
			map[string]time.Duration{"a3": 500 * time.Millisecond, "a4": 650 * time.Millisecond, "a5": 650 * time.Millisecond, "a6": 750 * time.Millisecond}},
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
