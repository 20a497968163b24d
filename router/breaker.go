package router

import (
	"sync"
	"time"
)

// breaker is a per-shard circuit breaker. It opens on a shard that is
// dead or stalled, not on one that is merely late: after `failures`
// consecutive failed calls, each sent after the previous one failed, it
// opens only once the shard has also failed a liveness check (a call
// with no checks, sent by the router on the first failure of a run; see
// Router.checkLiveness). Until then, and whenever the shard answers the
// check, a failed call answers only its own checks by policy. Open, calls
// are refused (answered by policy) until the cooldown has passed, then a
// single probe is let through; its success closes the circuit, its
// failure opens it for another cooldown. A probe that ends without a
// verdict (the router stopped while it was in flight) frees the slot at
// once, and a probe slot held longer than the cooldown is taken as lost,
// so the circuit can never stay half-open. A failed probe is followed by a
// liveness check too: a shard that answers it closes the circuit.
//
// Why a liveness check and not the misses alone: on an oversubscribed
// machine, calls to a healthy shard miss a 20ms deadline in runs because
// the processes wait for a CPU, not because the shard stopped deciding
// (BENCHMARKS.md, "A flood from one service"). Counted alone, such runs
// opened the circuits, and a flood from one service had every service's
// checks answered by policy for a cooldown. A shard that is killed,
// stopped (SIGSTOP) or cut off answers nothing at all, the check included,
// and a dead one refuses it at once; a shard starved of CPU answers the
// tiny check, late but within the liveness timeout, which counts the
// router's own running time (liveness.go: counted in wall time, a router
// starved of CPU took its own delay for the shard's silence). So the
// circuit opens for the shard that cannot answer, a few hundred ms after
// it stopped (the price: its users pay the deadline that much longer
// than after 3 misses), and a late shard costs only the checks of the
// calls that missed.
//
// Why not an adaptive concurrency limit instead (AIMD or a gradient, as
// Netflix's concurrency-limits or Envoy's adaptive concurrency filter),
// which would keep calls small and queue the excess in the router, where
// the fair queues shed the flood's own checks: the misses measured are not
// a shard's queue growing with its load (its decision time stayed under
// 5ms for 344 of 352 batches) but processes waiting for a CPU, which
// smaller or fewer calls do not shorten (halving a call after a miss was
// tried: bank's checks were still 54% by policy). And whatever the limit,
// a run of misses still has to be told apart from a dead shard, which
// only an answer, or its absence, does.
//
// It judges the shard only: a call counts from when it is sent, so time
// that checks spent queued in the router counts for nothing, and checks
// the router sheds for its own overload never reach it. It reads no
// clock: the caller passes the time in.
type breaker struct {
	failures int
	cooldown time.Duration

	mu        sync.Mutex
	failed    int
	failedAt  time.Time // when the last failure counted ended
	silent    bool      // a liveness check sent in this run of failures went unanswered
	checking  bool      // a liveness check is in flight
	checkAt   time.Time // when it was sent
	checkRun  uint64    // run when it was sent
	run       uint64    // successes so far: a run of failures ends at each
	openUntil time.Time
	probing   bool
	probeAt   time.Time // when the probe in flight was let through
}

// tripped reports whether the circuit is open (or half-open). The caller
// holds mu.
func (b *breaker) tripped() bool { return b.failed >= b.failures && b.silent }

// allow reports whether a call may go to the shard now, and whether that
// call is the circuit's probe.
func (b *breaker) allow(now time.Time) (probe, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.tripped():
		return false, true
	case now.Before(b.openUntil):
		return false, false
	case b.probing && now.Sub(b.probeAt) < b.cooldown:
		return false, false
	}
	b.probing, b.probeAt = true, now
	return true, true
}

// refusing reports whether allow would refuse a call now, without taking
// the probe slot: checks bound for a shard whose circuit refuses are
// answered at once instead of queuing for a call.
func (b *breaker) refusing(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.tripped():
		return false
	case now.Before(b.openUntil):
		return true
	}
	return b.probing && now.Sub(b.probeAt) < b.cooldown
}

// success records that the shard answered a call, or a liveness check: it
// is alive, the run of failures ends, and the circuit closes. It reports
// whether the circuit was open.
func (b *breaker) success() (closed bool) {
	b.mu.Lock()
	closed = b.tripped()
	b.failed, b.silent, b.probing = 0, false, false
	b.run++
	b.mu.Unlock()
	return closed
}

// failure counts a call sent at sent that failed at now. It reports
// whether this failure opened the circuit (or kept it open for another
// cooldown), and whether the caller must now check the shard's liveness
// (then it reports the verdict to alive, silence or abandonCheck): on the
// first failure of a run, and on a failed probe, so that a probe call that
// was only late (a full call, which must meet the deadline) does not keep
// a live shard's circuit open for another cooldown. A call
// sent before the last failure counted was in flight through the same
// stall: it is not counted again, so that one stall that fails every call
// in flight counts once, however many there were. The circuit opens at
// `failures` in a row once a liveness check went unanswered, and a failed
// probe opens it for another cooldown.
func (b *breaker) failure(sent, now time.Time) (opened, check bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	probeFailed := b.tripped() && b.probing && !sent.Before(b.probeAt)
	b.probing = false
	if b.failed > 0 && !sent.After(b.failedAt) {
		return false, false
	}
	b.failed++
	b.failedAt = now
	opened = b.tripped()
	if opened {
		b.openUntil = now.Add(b.cooldown)
	}
	switch {
	case b.checking && now.Sub(b.checkAt) < b.cooldown:
		// A check in flight (one held longer than a cooldown is taken
		// as lost) gives the verdict.
		return opened, false
	case b.silent && !probeFailed:
		// Known silent since this run began: no new check.
		return opened, false
	}
	// The first failure of a run, or a failed probe: a shard that answers
	// the check is alive, and closes the circuit again.
	b.checking, b.checkAt, b.checkRun = true, now, b.run
	return opened, true
}

// alive records that the shard answered a liveness check: as success.
func (b *breaker) alive() (closed bool) {
	b.mu.Lock()
	b.checking = false
	b.mu.Unlock()
	return b.success()
}

// silence records that the shard answered nothing to a liveness check
// within its timeout, or refused it, at now. The circuit opens at once if
// `failures` calls in a row failed already, else at the failure that
// makes them so (unless a call succeeds first). A verdict on a check sent
// before a call succeeded is out of date, and ignored. It reports whether
// the circuit opened.
func (b *breaker) silence(now time.Time) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.checking = false
	if b.checkRun != b.run || b.silent {
		return false
	}
	b.silent = true
	if !b.tripped() {
		return false
	}
	b.openUntil = now.Add(b.cooldown)
	return true
}

// abandonCheck ends a liveness check that gave no verdict (the router is
// stopping): the next failure may check again.
func (b *breaker) abandonCheck() {
	b.mu.Lock()
	b.checking = false
	b.mu.Unlock()
}

// abandon ends a call that gave no verdict on the shard: when it was the
// probe, the next call may probe at once.
func (b *breaker) abandon(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// open reports whether the circuit is open (for metrics and tests).
func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripped()
}
