package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// numCodes is one past the highest gRPC code (Unauthenticated, 16).
const numCodes = 17

// stats are one worker's counts for one phase. Only the worker writes
// them; the progress line reads the atomic fields while it runs, and the
// rest is read once the worker is done.
type stats struct {
	hist     histogram
	requests atomic.Uint64 // answered or failed
	errors   atomic.Uint64

	checks     uint64 // in answered requests
	allowed    uint64
	denied     uint64
	policy     uint64
	noRule     uint64 // allowed without a rule (of the allowed)
	badAnswers uint64 // answers without one decision per check
	failovers  uint64 // requests sent once more to the next address
	codes      [numCodes]uint64
	_          [64]byte // keeps the next worker's counters off this cache line
}

// newStats returns zeroed stats with their memory touched, so that the
// page faults of a thousand workers' histograms fall before the measured
// phase rather than into the bench's CPU per request.
func newStats() *stats {
	s := &stats{}
	for i := 0; i < numBucket; i += 4096 / 8 {
		s.hist.counts[i].Store(0)
	}
	return s
}

// worker is one goroutine's share of the load: its own message, users,
// connection and stats, so that nothing on the request path is shared.
type worker struct {
	id   int
	req  request
	pick *picker
	// conns are every connection, Options.Connections per address in
	// address order; the worker sends on conns[at], and moves on by step
	// (the next address's) when its router is gone.
	conns    []endpoint
	at, step int
	names    []string
	st       *stats
}

// send sends the worker's request. When it fails UNAVAILABLE (its router
// is gone: killed, stopping, or not yet back) and bench was given more
// than one address, the worker moves to the next address's connection and
// sends the request there once more: a check the gone router had already
// counted counts twice, which errs toward denying. The worker stays on the
// new router. Unlike the Go client, which resends a sent check only when
// its connection broke before any answer, the bench also moves on an
// UNAVAILABLE that a live router answered itself (routers answer checks
// by failure policy rather than so, so a load generator can afford it).
func (w *worker) send(ctx context.Context) error {
	err := w.req.send(ctx, w.conns[w.at])
	if err != nil && w.step < len(w.conns) && status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		w.at = (w.at + w.step) % len(w.conns)
		w.st.failovers++
		err = w.req.send(ctx, w.conns[w.at])
	}
	return err
}

// outcome records one request's answer (err nil) or failure.
func (w *worker) outcome(err error, latency time.Duration, checks int) {
	st := w.st
	st.hist.record(latency)
	if err == nil && !w.req.tally(st) {
		st.badAnswers++
		err = errBadAnswer
	}
	if err != nil {
		c := status.Code(err)
		if int(c) >= numCodes {
			c = codes.Unknown
		}
		if err != errBadAnswer {
			st.codes[c]++
		}
		st.errors.Add(1)
	} else {
		st.checks += uint64(checks)
	}
	st.requests.Add(1)
}

// errBadAnswer marks an answer without one decision per check.
var errBadAnswer = status.Error(codes.Internal, "answer without one decision per check")

// load is one run of the workers: a warmup or a measured phase.
type load struct {
	o       *Options
	workers []*worker
	// span is how long the run issues requests; count, when above 0, ends
	// it sooner, after count requests in all.
	span  time.Duration
	count int
}

// run runs the load and returns its wall time. Requests still in flight
// when ctx is cancelled are not counted; a request that is still
// unanswered o.Timeout after the end of the span fails with
// DeadlineExceeded.
func (l *load) run(ctx context.Context) time.Duration {
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.span+l.o.Timeout)
	defer cancel()
	// Cancelling the caller's ctx (Ctrl-C) cancels the calls too.
	stopCalls := context.AfterFunc(ctx, cancel)
	defer stopCalls()

	var stop atomic.Bool
	start := time.Now()
	if l.o.openLoop() {
		// A little ahead, so that every worker is waiting for its first
		// slot when the schedule starts.
		start = start.Add(10 * time.Millisecond)
	}
	end := start.Add(l.span)
	timer := time.AfterFunc(time.Until(end), func() { stop.Store(true) })
	defer timer.Stop()

	var wg sync.WaitGroup
	n := len(l.workers)
	for _, w := range l.workers {
		quota := 0
		if l.count > 0 {
			// Worker i takes requests i, i+n, i+2n, ... of count.
			quota = (l.count - w.id + n - 1) / n
			if quota == 0 {
				continue
			}
		}
		wg.Go(func() {
			if l.o.openLoop() {
				l.open(ctx, callCtx, w, &stop, start, end, quota)
			} else {
				l.closed(ctx, callCtx, w, &stop, quota)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// closed sends one request after another until stop, or quota requests
// when quota is above 0.
func (l *load) closed(ctx, callCtx context.Context, w *worker, stop *atomic.Bool, quota int) {
	checks := l.o.Checks
	for i := 0; quota == 0 || i < quota; i++ {
		if stop.Load() {
			return
		}
		w.req.draw(w.pick, w.names)
		t := time.Now()
		err := w.send(callCtx)
		lat := time.Since(t)
		if ctx.Err() != nil {
			return // interrupted: the answer is not the server's
		}
		w.outcome(err, lat, checks)
		if callCtx.Err() != nil {
			return
		}
	}
}

// open sends requests at their scheduled times: this worker takes slots
// id, id+n, id+2n, ... of a schedule with one slot every 1/Rate seconds
// from start, until end, or quota slots when quota is above 0. Latency
// runs from the slot's time, so a slot that waited for this worker's
// previous answer counts the wait.
func (l *load) open(ctx, callCtx context.Context, w *worker, stop *atomic.Bool, start, end time.Time, quota int) {
	checks := l.o.Checks
	n := len(l.workers)
	interval := float64(time.Second) / l.o.Rate
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := 0; quota == 0 || i < quota; i++ {
		slot := w.id + i*n
		at := start.Add(time.Duration(float64(slot) * interval))
		if quota == 0 && !at.Before(end) {
			return
		}
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		if stop.Load() {
			return // past the span: slots still waiting for this worker are dropped
		}
		w.req.draw(w.pick, w.names)
		err := w.send(callCtx)
		lat := time.Since(at)
		if ctx.Err() != nil {
			return
		}
		w.outcome(err, lat, checks)
		if callCtx.Err() != nil {
			return
		}
	}
}
