package batcher

import (
	"fmt"
	"sync"
	"time"
)

// Options shape a Queue.
type Options struct {
	// Calls bounds the calls in flight at once; default 2.
	Calls int
	// MaxWaiting bounds the weight waiting for a call; an Add beyond it is
	// refused, except into an empty queue; default 10000.
	MaxWaiting int
	// MaxCall bounds the weight of one call. Items are never split, so an
	// item heavier than this goes alone; default 1000.
	MaxCall int
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options { return Options{Calls: 2, MaxWaiting: 10_000, MaxCall: 1000} }

func (o *Options) fill() {
	d := DefaultOptions()
	if o.Calls == 0 {
		o.Calls = d.Calls
	}
	if o.MaxWaiting == 0 {
		o.MaxWaiting = d.MaxWaiting
	}
	if o.MaxCall == 0 {
		o.MaxCall = d.MaxCall
	}
}

func (o *Options) validate() error {
	switch {
	case o.Calls < 1:
		return fmt.Errorf("calls: %d is under the minimum of 1", o.Calls)
	case o.MaxWaiting < 1:
		return fmt.Errorf("max waiting: %d is under the minimum of 1", o.MaxWaiting)
	case o.MaxCall < 1:
		return fmt.Errorf("max call: %d is under the minimum of 1", o.MaxCall)
	}
	return nil
}

// Queue coalesces items of type T bound for one destination. It is safe for
// concurrent use.
type Queue[T any] struct {
	opts Options
	send func(batch []T)

	mu      sync.Mutex
	calls   int   // in flight
	waiting []T   // in arrival order
	weights []int // of waiting, at the same index
	weight  int   // sum of weights
	spare   [][]T // batch buffers to reuse
	// idle counts the workers waiting for a batch on handoff, less the
	// batches promised to them and not yet received.
	idle    int
	handoff chan []T
	linger  time.Duration
}

// linger is how long a worker goroutine waits for the next batch before it
// ends. Under load a worker goes from batch to batch, and keeps the stack
// that a call grew, instead of a new goroutine growing one per batch. (A
// variable for tests, read by New.)
var linger = time.Second

// New returns a Queue that calls send with each batch; send must not keep
// the slice after it returns. It panics on options that fail validation
// (a programmer's error: the router validates its own first).
func New[T any](opts Options, send func(batch []T)) *Queue[T] {
	opts.fill()
	if err := opts.validate(); err != nil {
		panic("batcher: " + err.Error())
	}
	return &Queue[T]{opts: opts, send: send, handoff: make(chan []T), linger: linger}
}

// Add queues item, of weight n. When a call slot is free the item leaves at
// once: in the caller's goroutine when inline (Add returns after the call),
// else in a new one. Otherwise it waits for the next call that ends. Add
// reports false, queuing nothing, when the weight waiting would pass
// MaxWaiting.
func (q *Queue[T]) Add(item T, n int, inline bool) bool {
	q.mu.Lock()
	if q.weight > 0 && q.weight+n > q.opts.MaxWaiting {
		q.mu.Unlock()
		return false
	}
	q.waiting = append(q.waiting, item)
	q.weights = append(q.weights, n)
	q.weight += n
	if q.calls == q.opts.Calls {
		q.mu.Unlock()
		return true
	}
	q.calls++
	batch := q.take()
	if inline {
		q.mu.Unlock()
		q.inline(batch)
		return true
	}
	q.start(batch) // unlocks
	return true
}

// Waiting returns the weight waiting for a call.
func (q *Queue[T]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.weight
}

// inline makes the call for batch in the caller's goroutine, holding one
// call slot, then hands the slot and whatever waits to a worker.
func (q *Queue[T]) inline(batch []T) {
	q.send(batch)
	q.mu.Lock()
	q.recycle(batch)
	if len(q.waiting) == 0 {
		q.calls--
		q.mu.Unlock()
		return
	}
	q.start(q.take()) // unlocks
}

// start hands batch, with the call slot held for it, to an idle worker, or
// to a new one. The caller holds mu; start releases it.
func (q *Queue[T]) start(batch []T) {
	if q.idle > 0 {
		q.idle--
		q.mu.Unlock()
		q.handoff <- batch // a worker promised: it receives at once
		return
	}
	q.mu.Unlock()
	go q.work(batch)
}

// work makes the calls for batch and whatever waits after it, holding one
// call slot, then lingers for a batch to be handed to it.
func (q *Queue[T]) work(batch []T) {
	var timer *time.Timer
	for {
		q.send(batch)
		q.mu.Lock()
		q.recycle(batch)
		if len(q.waiting) > 0 {
			batch = q.take()
			q.mu.Unlock()
			continue
		}
		q.calls--
		q.idle++
		q.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(q.linger)
		} else {
			timer.Reset(q.linger)
		}
		select {
		case batch = <-q.handoff:
			timer.Stop()
			continue
		case <-timer.C:
		}
		q.mu.Lock()
		if q.idle > 0 { // more workers wait than batches were promised
			q.idle--
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		batch = <-q.handoff // a batch was promised to every waiting worker
	}
}

// take removes the next batch from the front of waiting: items up to
// MaxCall weight, at least one. The caller holds mu.
func (q *Queue[T]) take() []T {
	n, w := 0, 0
	for n < len(q.waiting) && (n == 0 || w+q.weights[n] <= q.opts.MaxCall) {
		w += q.weights[n]
		n++
	}
	q.weight -= w
	var buf []T
	if k := len(q.spare); k > 0 {
		buf, q.spare = q.spare[k-1], q.spare[:k-1]
	}
	if n == len(q.waiting) {
		batch := q.waiting
		q.waiting, q.weights = buf, q.weights[:0]
		return batch
	}
	batch := append(buf, q.waiting[:n]...)
	m := copy(q.waiting, q.waiting[n:])
	clear(q.waiting[m:])
	q.waiting = q.waiting[:m]
	q.weights = q.weights[:copy(q.weights, q.weights[n:])]
	return batch
}

// recycle keeps batch's buffer for a later take. The caller holds mu.
func (q *Queue[T]) recycle(batch []T) {
	clear(batch)
	if len(q.spare) <= q.opts.Calls {
		q.spare = append(q.spare, batch[:0])
	}
}
