// Package batcher merges requests that arrive close together and would
// send the same AWS call into one call, the way upstream Karpenter batches
// CreateFleet: requests are hashed into buckets, a bucket's window closes
// after IdleTimeout without a new request, after MaxTimeout in total, or
// when it holds MaxItems requests, and then one Exec call serves the
// whole bucket and fans the results back to the callers.
//
// A Batcher is safe for concurrent use. Each open bucket owns one
// goroutine, which ends when the bucket is executed, so nothing outlives
// MaxTimeout plus one Exec. A caller whose context ends before its bucket
// closes is dropped from it and returns the context's error; once the
// bucket is executing, the request is committed (the call may already be
// on the wire) and the caller returns the context's error while Exec goes
// on without it, which is why Exec runs on a context that is not cancelled
// with any one caller.
package batcher

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Result is one request's answer.
type Result[Out any] struct {
	Out Out
	Err error
}

// Options configure a Batcher.
type Options[In, Out any] struct {
	// IdleTimeout closes a bucket that received no request for this long.
	IdleTimeout time.Duration
	// MaxTimeout closes a bucket this long after its first request.
	MaxTimeout time.Duration
	// MaxItems closes a bucket when it holds this many requests (0: no cap).
	MaxItems int
	// Hash is the bucket key: requests with equal keys are merged. An
	// error fails that request alone.
	Hash func(In) (string, error)
	// Exec serves one bucket; it must return one Result per input, in
	// order. ctx carries the values of the bucket's first caller but is
	// never cancelled by a caller.
	Exec func(ctx context.Context, in []In) []Result[Out]
	// ExecTimeout bounds one Exec call (0: one minute).
	ExecTimeout time.Duration
	// HoldWhileBusy keeps a bucket open past IdleTimeout while an Exec of
	// the same key is running, once one of the key's calls has returned
	// in this busy spell (while the key's calls run without a break): the
	// bucket goes when the next running call returns, or when MaxTimeout
	// ends the window. When the calls are slower than the gaps between
	// arrivals, the requests that come in meanwhile gather into one call
	// instead of each gap opening a call of its own; MaxTimeout still
	// bounds how long any request waits.
	//
	// What the hold gathers is the trickle a return sets off: the callers'
	// workers come back from the returned call a few at a time, each with
	// its next request. Before the spell's first return no worker has come
	// back, so whatever arrives then is the rest of the burst whose first
	// part went in the running call (a round's launches reach the batcher
	// spread over the API server's answers and the callers' own work), and
	// holding it would add a whole call to its wait for nothing more to
	// gather: those buckets go as their windows close, beside the running
	// calls.
	//
	// A held bucket goes when the first of the running calls returns, not
	// the last: its requests wait for one call's answer, not for the
	// slowest of several. Each return releases at most the one bucket
	// that is open, so the calls in flight do not grow with the returns.
	HoldWhileBusy bool
	// Observe, when set, is told of each executed batch: how long its
	// window stayed open and how many requests it merged (upstream's
	// batch_time_seconds and batch_size metrics).
	Observe func(window time.Duration, size int)
}

// Batcher merges requests with equal hashes into one Exec call.
type Batcher[In, Out any] struct {
	opts Options[In, Out]

	mu      sync.Mutex
	buckets map[string]*bucket[In, Out]
	// busy holds, per key with an Exec running, how many run, whether one
	// of the spell's calls has returned, and a channel closed when the
	// next of them returns (HoldWhileBusy).
	busy map[string]*running
}

type running struct {
	n        int
	answered bool // a call of this spell has returned
	// returned is closed when one of the running Execs returns; the
	// Execs still running then get a new one.
	returned chan struct{}
}

type request[In, Out any] struct {
	in  In
	out chan Result[Out] // buffered: Exec never blocks on a caller that left
}

type bucket[In, Out any] struct {
	ctx      context.Context
	requests []*request[In, Out]
	added    chan struct{} // a request arrived: restart the idle timer
	full     chan struct{} // closed when MaxItems is reached
	closed   bool          // detached from the map; requests are committed
}

// New returns a Batcher.
func New[In, Out any](opts Options[In, Out]) *Batcher[In, Out] {
	if opts.ExecTimeout <= 0 {
		opts.ExecTimeout = time.Minute
	}
	return &Batcher[In, Out]{opts: opts, buckets: map[string]*bucket[In, Out]{}, busy: map[string]*running{}}
}

// Add queues in and waits for its result.
func (b *Batcher[In, Out]) Add(ctx context.Context, in In) (Out, error) {
	var zero Out
	key, err := b.opts.Hash(in)
	if err != nil {
		return zero, fmt.Errorf("hashing batched request: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	req := &request[In, Out]{in: in, out: make(chan Result[Out], 1)}

	b.mu.Lock()
	bk, ok := b.buckets[key]
	if !ok {
		bk = &bucket[In, Out]{
			ctx:   context.WithoutCancel(ctx),
			added: make(chan struct{}, 1),
			full:  make(chan struct{}),
		}
		b.buckets[key] = bk
		go b.wait(key, bk)
	}
	bk.requests = append(bk.requests, req)
	if b.opts.MaxItems > 0 && len(bk.requests) >= b.opts.MaxItems {
		b.detach(key, bk)
		close(bk.full)
	} else {
		select {
		case bk.added <- struct{}{}:
		default:
		}
	}
	b.mu.Unlock()

	select {
	case r := <-req.out:
		return r.Out, r.Err
	case <-ctx.Done():
		b.mu.Lock()
		if !bk.closed {
			// Not sent yet: leave the bucket, nothing was launched for us.
			for i, r := range bk.requests {
				if r == req {
					bk.requests = append(bk.requests[:i], bk.requests[i+1:]...)
					break
				}
			}
		}
		b.mu.Unlock()
		return zero, ctx.Err()
	}
}

// detach removes bk from the map so later requests open a new bucket. The
// caller holds b.mu.
func (b *Batcher[In, Out]) detach(key string, bk *bucket[In, Out]) {
	bk.closed = true
	if b.buckets[key] == bk {
		delete(b.buckets, key)
	}
}

// wait closes bk when its window ends and executes it.
func (b *Batcher[In, Out]) wait(key string, bk *bucket[In, Out]) {
	opened := time.Now()
	idle := time.NewTimer(b.opts.IdleTimeout)
	defer idle.Stop()
	max := time.NewTimer(b.opts.MaxTimeout)
	defer max.Stop()
	var held <-chan struct{} // nil: not holding; a nil channel never fires
	for open := true; open; {
		select {
		case <-bk.added:
			if held == nil {
				idle.Reset(b.opts.IdleTimeout)
			}
		case <-idle.C:
			if held = b.running(key); held == nil {
				open = false
			}
		case <-held:
			open = false
		case <-max.C:
			open = false
		case <-bk.full:
			open = false
		}
	}
	b.mu.Lock()
	b.detach(key, bk)
	requests := bk.requests
	b.mu.Unlock()
	if len(requests) == 0 {
		return // every caller left before the window closed
	}
	if b.opts.Observe != nil {
		b.opts.Observe(time.Since(opened), len(requests))
	}
	ins := make([]In, len(requests))
	for i, r := range requests {
		ins[i] = r.in
	}
	ctx, cancel := context.WithTimeout(bk.ctx, b.opts.ExecTimeout)
	defer cancel()
	b.started(key, held != nil)
	results := b.exec(ctx, ins)
	b.finished(key)
	for i, r := range requests {
		if i < len(results) {
			r.out <- results[i]
		} else {
			r.out <- Result[Out]{Err: fmt.Errorf("batched call returned %d results for %d requests", len(results), len(requests))}
		}
	}
}

// running is what an idle bucket of key waits for: a channel closed when
// the first of the key's running Execs returns, or nil (go now) when none
// runs, the batcher does not hold, or none of the spell's calls has
// returned yet (HoldWhileBusy). Each bucket asks once.
func (b *Batcher[In, Out]) running(key string) <-chan struct{} {
	if !b.opts.HoldWhileBusy {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.busy[key]
	if r == nil || !r.answered {
		return nil
	}
	return r.returned
}

// started counts a call of key as running. A call the hold kept back
// (held) goes on the spell that held it even if that spell's last call
// has just returned: the trickle it gathered goes on behind it.
func (b *Batcher[In, Out]) started(key string, held bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.busy[key]
	if r == nil {
		r = &running{returned: make(chan struct{}), answered: held}
		b.busy[key] = r
	}
	r.n++
}

func (b *Batcher[In, Out]) finished(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.busy[key]
	close(r.returned)
	r.answered = true
	if r.n--; r.n == 0 {
		delete(b.busy, key)
		return
	}
	r.returned = make(chan struct{})
}

// exec runs Exec and turns a panic into every caller's error, so no
// caller waits for an answer that never comes.
func (b *Batcher[In, Out]) exec(ctx context.Context, ins []In) (results []Result[Out]) {
	defer func() {
		if p := recover(); p != nil {
			results = make([]Result[Out], len(ins))
			for i := range results {
				results[i].Err = fmt.Errorf("batched call panicked: %v", p)
			}
		}
	}()
	return b.opts.Exec(ctx, ins)
}
