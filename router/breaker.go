package router

import (
	"sync"
	"time"
)

// breaker is a per-shard circuit breaker. After `failures` consecutive
// failed calls, each sent after the previous one failed, it opens: calls are refused (answered by policy) until the
// cooldown has passed, then a single probe is let through; its success
// closes the circuit, its failure opens it for another cooldown. A probe
// that ends without a verdict (the router stopped while it was in flight)
// frees the slot at once, and a probe slot held longer than the cooldown is
// taken as lost, so the circuit can never stay half-open.
//
// It judges the shard only: a call counts from when it is sent, so time
// that checks spent queued in the router counts for nothing, and checks
// the router sheds for its own overload never reach it.
type breaker struct {
	failures int
	cooldown time.Duration

	mu        sync.Mutex
	failed    int
	failedAt  time.Time // when the last failure counted ended
	openUntil time.Time
	probing   bool
	probeAt   time.Time // when the probe in flight was let through
}

// allow reports whether a call may go to the shard now, and whether that
// call is the circuit's probe.
func (b *breaker) allow(now time.Time) (probe, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.failed < b.failures:
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
	case b.failed < b.failures:
		return false
	case now.Before(b.openUntil):
		return true
	}
	return b.probing && now.Sub(b.probeAt) < b.cooldown
}

// success closes the circuit; it reports whether the circuit was open.
func (b *breaker) success() (closed bool) {
	b.mu.Lock()
	closed = b.failed >= b.failures
	b.failed, b.probing = 0, false
	b.mu.Unlock()
	return closed
}

// failure counts a call sent at sent that failed at now; the circuit opens
// at `failures` in a row, and a failed probe opens it for another
// cooldown. It reports whether this failure opened the circuit (or kept
// it open for another cooldown). A call sent before the last failure counted was in flight
// through the same stall: it is not counted again, so that one stall
// that fails every call in flight counts once, however many there were.
func (b *breaker) failure(sent, now time.Time) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if b.failed > 0 && !sent.After(b.failedAt) {
		return false
	}
	b.failed++
	b.failedAt = now
	if b.failed >= b.failures {
		b.openUntil = now.Add(b.cooldown)
		return true
	}
	return false
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
	return b.failed >= b.failures
}
