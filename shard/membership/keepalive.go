package membership

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keep-alives that know how long the lease certainly lives. etcd expires a
// lease TTL after the last keep-alive it applied, and it applied that one
// after the request left: so a keep-alive sent at s and answered lets the
// lease live until at least s + TTL, by the member's own clock. The etcd
// client's KeepAlive does not say when the request it answers was sent
// (several may be in flight), so the registration sends its own, one at a
// time, and keeps that bound (ConfirmedUntil). A shard stops deciding past
// it unless etcd is down for everyone (shard/leaseguard.go): past it, its
// lease may have expired and another shard taken its partitions over.

// keepAlive keeps lease alive with one keep-alive at a time, every third
// of its TTL, until ctx ends, and returns the channel of their answers,
// closed once the lease is gone (etcd says so) or no keep-alive has been
// answered for a TTL. The lease was last known alive by a request sent at
// sent (the grant, or a check of it), to live until at least until.
func (r *Registration) keepAlive(ctx context.Context, lease clientv3.LeaseID, sent, until time.Time) <-chan *clientv3.LeaseKeepAliveResponse {
	ttl := time.Duration(r.ttl) * time.Second
	r.confirm(until)
	ch := make(chan *clientv3.LeaseKeepAliveResponse, 1)
	go func() {
		defer close(ch)
		last := sent
		for {
			sent := time.Now()
			attempt, cancel := context.WithTimeout(ctx, max(ttl/3, 500*time.Millisecond))
			resp, err := r.cli.KeepAliveOnce(attempt, lease)
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				return
			case err == nil && resp.TTL > 0:
				last = sent
				r.confirm(sent.Add(time.Duration(resp.TTL) * time.Second))
				r.answered(time.Now())
				select {
				case ch <- resp:
				default: // the reader sees the next one
				}
			case time.Since(last) > ttl:
				return // etcd silent for a TTL: as the etcd client's KeepAlive does
			}
			wait := ttl / 3
			if err != nil {
				wait = 250 * time.Millisecond // retry soon: the lease may be short of time
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return ch
}

// answered records that etcd answered a keep-alive or a check at t.
func (r *Registration) answered(t time.Time) {
	r.mu.Lock()
	r.lastAnswer = t
	r.mu.Unlock()
}

// LastAnswered returns when etcd last answered one of the member's
// keep-alives or checks of its lease; zero when never.
func (r *Registration) LastAnswered() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastAnswer
}

// confirm records that the lease lives at least until t.
func (r *Registration) confirm(t time.Time) {
	r.mu.Lock()
	if t.After(r.confirmed) {
		r.confirmed = t
	}
	r.mu.Unlock()
}

// ConfirmedUntil returns the time, by this process's clock, until which
// the member's lease certainly lives in etcd: the last answered keep-alive's
// sending plus its TTL. Past it, etcd may have expired the lease.
func (r *Registration) ConfirmedUntil() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.confirmed
}

// Confirm asks etcd whether the lease still holds the record, with time
// left, and if so moves ConfirmedUntil on; it reports whether it does. A
// shard calls it before it stops deciding.
func (r *Registration) Confirm(ctx context.Context) bool {
	r.mu.Lock()
	lease := r.lease
	r.mu.Unlock()
	_, left, err := r.check(ctx, lease)
	return err == nil && left > 0
}

// check asks etcd what lease has left while it holds the record (holds),
// and when it does, records the answer (ConfirmedUntil, LastAnswered). It
// returns when the question was sent, from which the time left counts.
func (r *Registration) check(ctx context.Context, lease clientv3.LeaseID) (sent time.Time, left time.Duration, err error) {
	sent = time.Now()
	if left, err = r.holds(ctx, lease); err == nil && left > 0 {
		r.confirm(sent.Add(left))
		r.answered(time.Now())
	}
	return sent, left, err
}
