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
	shed func(item T)

	mu    sync.Mutex
	calls int     // in flight
	line  fair[T] // waiting, by class
	spare [][]T   // batch buffers to reuse
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

// New returns a Queue that calls send with each batch, and shed with each
// item it accepted and then displaced to make room for a class under its
// share (see Add; shed may be nil when Add is given one class only, which
// displaces nothing); send must not keep the slice after it returns. It
// panics on options that fail validation (a programmer's error: the router
// validates its own first).
func New[T any](opts Options, send func(batch []T), shed func(item T)) *Queue[T] {
	opts.fill()
	if err := opts.validate(); err != nil {
		panic("batcher: " + err.Error())
	}
	return &Queue[T]{opts: opts, send: send, shed: shed, handoff: make(chan []T), linger: linger,
		line: fair[T]{max: opts.MaxWaiting, maxCall: opts.MaxCall}}
}

// Add queues item, of weight n, in class (0 and up: the router's
// services). When a call slot is free the item leaves at once: in the
// caller's goroutine when inline (Add returns after the call), else in a
// new one. Otherwise it waits for the next call that ends; calls take the
// classes' items in turn. Past MaxWaiting weight waiting, Add lets item in
// only if its class, with it, holds no more than its share of MaxWaiting
// (divided among the classes waiting), displacing the newest items of the
// class holding the most, which it hands to shed before it returns; else
// it reports false, queuing nothing.
func (q *Queue[T]) Add(item T, class, n int, inline bool) bool {
	q.mu.Lock()
	var shed []T
	if q.line.weight > 0 && q.line.weight+n > q.opts.MaxWaiting {
		shed = q.buffer()
	}
	shed, ok := q.line.push(item, class, n, shed)
	if len(shed) > 0 {
		q.mu.Unlock()
		for _, it := range shed {
			q.shed(it)
		}
		q.mu.Lock()
	}
	if shed != nil {
		q.recycle(shed)
	}
	if !ok || q.calls == q.opts.Calls || q.line.empty() {
		q.mu.Unlock()
		return ok
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
	return q.line.weight
}

// inline makes the call for batch in the caller's goroutine, holding one
// call slot, then hands the slot and whatever waits to a worker.
func (q *Queue[T]) inline(batch []T) {
	q.send(batch)
	q.mu.Lock()
	q.recycle(batch)
	if q.line.empty() {
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
		if !q.line.empty() {
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

// take removes the next batch from the line (see fair). The caller holds
// mu.
func (q *Queue[T]) take() []T { return q.line.take(q.buffer()) }

// buffer returns an empty batch buffer, one kept for reuse if any. The
// caller holds mu.
func (q *Queue[T]) buffer() []T {
	var buf []T
	if k := len(q.spare); k > 0 {
		buf, q.spare = q.spare[k-1], q.spare[:k-1]
	}
	return buf
}

// recycle keeps batch's buffer for a later take. The caller holds mu.
func (q *Queue[T]) recycle(batch []T) {
	clear(batch)
	if len(q.spare) <= q.opts.Calls {
		q.spare = append(q.spare, batch[:0])
	}
}
