package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// batcher coalesces concurrent single checks into one RPC: the first check
// of a batch starts a timer of window; the batch is sent when the timer
// fires or when it holds max checks, whichever comes first. The RPC's
// deadline is the earliest deadline among its checks.
type batcher struct {
	c      *Client
	window time.Duration
	max    int

	mu       sync.Mutex
	pending  []*waiter
	earliest time.Time
	timer    *time.Timer
	gen      uint64 // bumped when a batch is taken; stale timers see it
	closed   bool
}

type waiter struct {
	check    *shardlimitv1.Check
	deadline time.Time
	trace    map[string]string // the caller's trace context (Options.Stream only)
	done     chan result       // buffered 1: the sender never blocks
}

type result struct {
	decision Decision
	err      error
}

// add queues w; its result arrives on w.done.
func (b *batcher) add(w *waiter) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.pending = append(b.pending, w)
	if len(b.pending) == 1 {
		b.earliest = w.deadline
		gen := b.gen
		b.timer = time.AfterFunc(b.window, func() { b.flush(gen) })
	} else if w.deadline.Before(b.earliest) {
		b.earliest = w.deadline
	}
	var full []*waiter
	var deadline time.Time
	if len(b.pending) >= b.max {
		full, deadline = b.takeLocked()
	}
	b.mu.Unlock()
	if full != nil {
		go b.send(full, deadline)
	}
	return nil
}

// flush sends the batch the timer of generation gen was started for, unless
// it was already taken.
func (b *batcher) flush(gen uint64) {
	b.mu.Lock()
	if gen != b.gen || len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	ws, deadline := b.takeLocked()
	b.mu.Unlock()
	b.send(ws, deadline)
}

func (b *batcher) takeLocked() ([]*waiter, time.Time) {
	ws := b.pending
	b.pending = nil
	b.gen++
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return ws, b.earliest
}

// close answers the waiting checks with ErrClosed and refuses new ones.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	ws, _ := b.takeLocked()
	b.mu.Unlock()
	for _, w := range ws {
		w.done <- result{err: ErrClosed}
	}
}

// send decides the checks of ws in one RPC. When the router rejects the
// batch as a whole for one check (rejectedWhole), each check is sent again
// on its own, so that one caller's bad check does not fail the others.
func (b *batcher) send(ws []*waiter, deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	checks := make([]*shardlimitv1.Check, len(ws))
	for i, w := range ws {
		checks[i] = w.check
	}
	resp, err := b.c.call(ctx, &shardlimitv1.CheckRequest{Checks: checks})
	if len(ws) > 1 && rejectedWhole(status.Code(err)) {
		eachAlone(ws, func(w *waiter) ([]Decision, error) {
			return b.c.decide(context.Background(), ctx, []*shardlimitv1.Check{w.check})
		})
		return
	}
	ds, err := b.c.outcome(context.Background(), len(ws), resp, err)
	deliver(ws, ds, err)
}

// rejectedWhole reports whether a router answering a batch with code
// rejected it whole for what one of its checks names, counting nothing:
// INVALID_ARGUMENT, NOT_FOUND (a service without rules) or
// PERMISSION_DENIED (a service outside the caller's grant). Its checks
// are then each sent again alone.
func rejectedWhole(code codes.Code) bool {
	return code == codes.InvalidArgument || code == codes.NotFound || code == codes.PermissionDenied
}

// eachAlone decides each check of ws on its own, all at once, and
// delivers each answer: a batch that a router rejected whole for one
// caller's check is sent again so that the others are decided.
func eachAlone(ws []*waiter, decide func(w *waiter) ([]Decision, error)) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			ds, err := decide(w)
			deliver([]*waiter{w}, ds, err)
		})
	}
	wg.Wait()
}

func deliver(ws []*waiter, ds []Decision, err error) {
	for i, w := range ws {
		if err != nil {
			w.done <- result{err: err}
		} else {
			w.done <- result{decision: ds[i]}
		}
	}
}
