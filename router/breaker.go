package router

import (
	"sync"
	"time"
)

// breaker is a per-shard circuit breaker. After `failures` consecutive
// failed calls it opens: calls are refused (answered by policy) until the
// cooldown has passed, then a single probe is let through; its success
// closes the circuit, its failure opens it for another cooldown.
type breaker struct {
	failures int
	cooldown time.Duration

	mu        sync.Mutex
	failed    int
	openUntil time.Time
	probing   bool
}

// allow reports whether a call may go to the shard now.
func (b *breaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.failed < b.failures:
		return true
	case now.Before(b.openUntil) || b.probing:
		return false
	}
	b.probing = true
	return true
}

func (b *breaker) success() {
	b.mu.Lock()
	b.failed, b.probing = 0, false
	b.mu.Unlock()
}

func (b *breaker) failure(now time.Time) {
	b.mu.Lock()
	b.failed++
	b.probing = false
	if b.failed >= b.failures {
		b.openUntil = now.Add(b.cooldown)
	}
	b.mu.Unlock()
}

// open reports whether the circuit is open (for metrics and tests).
func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed >= b.failures
}
