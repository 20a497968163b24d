package batcher

import (
	"fmt"
	"runtime"
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
	// idle counts the workers waiting for a call slot on handoff, less
	// the slots promised to them and not yet received.
	idle    int
	handoff chan struct{} // hands a call slot to an idle worker
	linger  time.Duration
	yield   func()
}

// linger is how long a worker goroutine waits for the next call slot
// before it ends. Under load a worker goes from batch to batch, and keeps the stack
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
	return &Queue[T]{opts: opts, send: send, shed: shed, handoff: make(chan struct{}), linger: linger, yield: yield,
		line: fair[T]{max: opts.MaxWaiting, maxCall: opts.MaxCall}}
}

// Add queues item, of weight n, in class (0 and up: the router's
// services). When a call slot is free, Add takes it for a call at once:
// in the caller's goroutine when inline (Add returns after the call),
// else in a worker's. The call first lets the goroutines ready to run go
// (see gather), then carries what waits, the item with it unless a call
// that ended meanwhile took it. Otherwise the item waits for the next call
// that ends; calls take the classes' items in turn. Past MaxWaiting weight waiting, Add lets item in
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
	if inline {
		q.mu.Unlock()
		q.inline()
		return true
	}
	q.start() // unlocks
	return true
}

// Waiting returns the weight waiting for a call.
func (q *Queue[T]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.line.weight
}

// inline makes a call in the caller's goroutine, holding one call slot,
// then hands the slot to a worker when more waits.
func (q *Queue[T]) inline() {
	if !q.call() {
		return
	}
	q.mu.Lock()
	if q.line.empty() {
		q.calls--
		q.mu.Unlock()
		return
	}
	q.start() // unlocks
}

// start hands the call slot held for it to an idle worker, or to a new
// one. The caller holds mu; start releases it.
func (q *Queue[T]) start() {
	if q.idle > 0 {
		q.idle--
		q.mu.Unlock()
		q.handoff <- struct{}{} // a worker promised: it receives at once
		return
	}
	q.mu.Unlock()
	go q.work()
}

// work makes calls, holding one call slot, until nothing waits, then
// lingers for a slot to be handed to it.
func (q *Queue[T]) work() {
	var timer *time.Timer
	for {
		for q.call() {
		}
		q.mu.Lock()
		q.idle++
		q.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(q.linger)
		} else {
			timer.Reset(q.linger)
		}
		select {
		case <-q.handoff:
			timer.Stop()
			continue
		case <-timer.C:
		}
		q.mu.Lock()
		if q.idle > 0 { // more workers wait than slots were promised
			q.idle--
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		<-q.handoff // a slot was promised to every waiting worker
	}
}

// call makes one call, holding a call slot, for the batch that gather
// takes. It reports false, having freed the slot, when nothing waited.
func (q *Queue[T]) call() bool {
	batch := q.gather()
	if batch == nil {
		return false
	}
	q.send(batch)
	q.mu.Lock()
	q.recycle(batch)
	q.mu.Unlock()
	return true
}

// maxYields bounds the yields of one gather.
const maxYields = 4

// yield lets the goroutines ready to run go first (a variable for tests,
// read by New).
var yield = runtime.Gosched

// gather takes the next batch, holding a call slot, after letting the
// goroutines ready to run go first: under load they are the requests
// about to add items, which then leave in this call instead of one each.
// It yields again while the line grows, up to maxYields times, and not
// once the line holds a full call. On an idle machine nothing else is
// ready, and one yield returns at once. When nothing waits (another call
// took it meanwhile), gather frees the slot and returns nil.
func (q *Queue[T]) gather() []T {
	last := -1
	for range maxYields {
		q.mu.Lock()
		w := q.line.weight
		q.mu.Unlock()
		if w == last || w >= q.opts.MaxCall {
			break
		}
		last = w
		q.yield()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.line.empty() {
		q.calls--
		return nil
	}
	return q.take()
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
