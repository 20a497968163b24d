package etcd

import (
	"context"
	"time"
)

// Backoff is a retry delay that starts at 100ms and doubles up to Max
// (default 2s) after every failed attempt. The zero value is ready to use.
type Backoff struct {
	// Max caps the delay; default 2s.
	Max time.Duration
	d   time.Duration
}

// Next returns the delay the next Wait sleeps.
func (b *Backoff) Next() time.Duration {
	if b.d == 0 {
		return 100 * time.Millisecond
	}
	return b.d
}

// Wait sleeps the current delay, then doubles it. It reports false, at
// once, if ctx ends first.
func (b *Backoff) Wait(ctx context.Context) bool {
	d := b.Next()
	limit := b.Max
	if limit == 0 {
		limit = 2 * time.Second
	}
	b.d = min(2*d, limit)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Reset starts the delay over at 100ms, after a success.
func (b *Backoff) Reset() { b.d = 0 }
