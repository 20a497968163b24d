package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/member"
)

// Registration keeps one member registered until Close.
type Registration struct {
	cli    *clientv3.Client
	key    string
	value  string
	ttl    int64
	log    *slog.Logger
	ctx    context.Context // lives until Close or Abandon; keep-alives run under it
	cancel context.CancelFunc
	done   chan struct{}

	// onLost, when set, replaces registering again after a lost lease.
	onLost func()

	mu        sync.Mutex
	confirmed time.Time // until when the lease certainly lives (keepalive.go)
	// lastAnswer is when etcd last answered a keep-alive or a check.
	lastAnswer time.Time
	lease      clientv3.LeaseID
	rev        int64 // etcd revision of the last write of the record
	lost       bool
}

// Register writes m under prefix with a lease of ttl and keeps it alive in the
// background, registering again whenever the lease is lost. It returns once
// the first write succeeded.
func Register(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, m member.Member, ttl time.Duration, log *slog.Logger) (*Registration, error) {
	return register(ctx, cli, layout, m, ttl, log, nil)
}

// RegisterUntilLost is Register, except that a lost lease ends the
// registration instead of registering again: onLost is called once, in the
// registration's goroutine, as soon as the lease is seen lost (its
// keep-alives end, or the record is deleted). The caller registers again
// when it is ready to: a shard first gives its counters back and then
// joins warm, so that it never serves stale counters.
func RegisterUntilLost(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, m member.Member, ttl time.Duration, log *slog.Logger, onLost func()) (*Registration, error) {
	return register(ctx, cli, layout, m, ttl, log, onLost)
}

func register(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, m member.Member, ttl time.Duration, log *slog.Logger, onLost func()) (*Registration, error) {
	b, err := member.Encode(m)
	if err != nil {
		return nil, err
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("lease ttl: %v is under the minimum of 1s", ttl)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r := &Registration{
		cli: cli, key: layout.Member(m.ID), value: string(b), ttl: int64(ttl / time.Second),
		log: log.With("member", m.ID), done: make(chan struct{}), ctx: runCtx, cancel: cancel, onLost: onLost,
	}
	// A record held by another live member with our id is, after a crash
	// and a quick restart, our own previous incarnation: wait for its lease
	// to expire (at most the TTL) before giving up.
	deadline := time.Now().Add(ttl + 2*time.Second)
	ka, err := r.register(ctx)
	for errors.Is(err, ErrDuplicateID) && time.Now().Before(deadline) {
		r.log.Warn("member id still held, waiting for its lease to expire", "key", r.key)
		select {
		case <-ctx.Done():
			cancel()
			return nil, fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
		ka, err = r.register(ctx)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go r.run(ka)
	return r, nil
}

// register grants a lease, writes the record under it only if the key is
// free (another live shard with the same id is an error) and starts
// keep-alives, which last until Close or Abandon. ctx bounds only the writes.
func (r *Registration) register(ctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	granted := time.Now()
	lease, err := r.cli.Grant(ctx, r.ttl)
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	r.mu.Lock()
	value := r.value
	r.mu.Unlock()
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0)).
		Then(clientv3.OpPut(r.key, value, clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", r.key, err)
	}
	if !resp.Succeeded {
		_, _ = r.cli.Revoke(ctx, lease.ID)
		return nil, fmt.Errorf("%w: %s is held by another live member", ErrDuplicateID, r.key)
	}
	ka := r.keepAlive(r.ctx, lease.ID, granted, granted.Add(time.Duration(lease.TTL)*time.Second))
	r.mu.Lock()
	r.lease, r.rev = lease.ID, resp.Header.Revision
	r.mu.Unlock()
	r.answered(time.Now())
	r.log.Debug("membership registered under a new lease", "lease", fmt.Sprintf("%x", int64(lease.ID)), "ttl_s", r.ttl, "revision", resp.Header.Revision)
	return ka, nil
}

// ErrDuplicateID means another live member holds the same id.
var ErrDuplicateID = errors.New("duplicate member id")

// run drains keep-alive answers and watches the record; when the lease is
// lost (keep-alives end, or the record is deleted behind the member's back)
// it calls onLost and ends, or without onLost registers again, retrying
// with backoff until Close.
func (r *Registration) run(ka <-chan *clientv3.LeaseKeepAliveResponse) {
	ctx := r.ctx
	defer close(r.done)
	for {
		r.waitLost(ctx, ka)
		if ctx.Err() != nil {
			return
		}
		if ka = r.resume(ctx); ka != nil {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if r.onLost != nil {
			r.mu.Lock()
			r.lost = true
			r.mu.Unlock()
			r.log.Warn("membership lease lost")
			r.cancel() // ends the keep-alives of the lost lease
			r.onLost()
			return
		}
		r.log.Warn("membership lease lost; registering again")
		var backoff etcd.Backoff
		for {
			var err error
			attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
			ka, err = r.register(attempt)
			cancel()
			if err == nil {
				r.log.Info("membership registered again")
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("membership register failed", "err", err, "retry_in", backoff.Next())
			if !backoff.Wait(ctx) {
				return
			}
		}
	}
}

// resume keeps the current lease alive again if etcd still holds it with
// the record on it. Keep-alives end once etcd has not answered for a TTL,
// but that does not mean the lease is gone: a restarted etcd restores its
// leases for a full TTL, and while etcd was away nobody could see the
// member go. Registering anew instead would collide with the member's own
// record until that restored lease expired, and every router would drop
// the member and take it back. resume waits for etcd (with backoff) and
// returns the new keep-alives, or nil when the record or its lease is
// really gone, or ctx ended.
func (r *Registration) resume(ctx context.Context) <-chan *clientv3.LeaseKeepAliveResponse {
	r.mu.Lock()
	lease := r.lease
	r.mu.Unlock()
	// Short waits: the lease etcd restores lasts one TTL from its return.
	backoff := etcd.Backoff{Max: 500 * time.Millisecond}
	warned := false
	for {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		sent, left, err := r.check(attempt, lease)
		cancel()
		if err == nil {
			if left <= 0 {
				return nil
			}
			r.log.Info("membership lease kept: etcd answers again and still holds it")
			return r.keepAlive(r.ctx, lease, sent, sent.Add(left))
		}
		if ctx.Err() != nil {
			return nil
		}
		if !warned {
			r.log.Warn("membership lease unconfirmed: etcd does not answer; asking again until it does", "err", err)
			warned = true
		}
		if !backoff.Wait(ctx) {
			return nil
		}
	}
}

// waitLost returns once the lease is lost or ctx ends: when the keep-alive
// channel closes, or the record is deleted (a revoked lease deletes it at
// once, before the next keep-alive would tell).
func (r *Registration) waitLost(ctx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	r.mu.Lock()
	rev := r.rev
	r.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := r.cli.Watch(wctx, r.key, clientv3.WithRev(rev+1))
	for {
		select {
		case _, ok := <-ka:
			if !ok {
				r.log.Debug("membership keep-alives ended (etcd silent for a TTL, or the lease expired)")
				return
			}
		case wr, ok := <-wch:
			if !ok || wr.Canceled {
				wch = nil // keep-alives alone tell
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					r.log.Debug("membership record deleted behind this member's back", "key", r.key, "revision", ev.Kv.ModRevision)
					return
				}
			}
		}
	}
}

// holds returns the time the lease has left when the record is still
// attached to it, and 0 when not (or the lease is gone).
func (r *Registration) holds(ctx context.Context, lease clientv3.LeaseID) (time.Duration, error) {
	resp, err := r.cli.Get(ctx, r.key)
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != lease {
		return 0, err
	}
	ttl, err := r.cli.TimeToLive(ctx, lease)
	if err != nil {
		return 0, err
	}
	return time.Duration(max(ttl.TTL, 0)) * time.Second, nil
}

// Update rewrites the member record under the current lease, and is what a
// re-registration writes from then on.
func (r *Registration) Update(ctx context.Context, m member.Member) error {
	b, err := member.Encode(m)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.value = string(b)
	lease := r.lease
	r.mu.Unlock()
	_, err = r.cli.Put(ctx, r.key, string(b), clientv3.WithLease(lease))
	return err
}

// Lost reports whether the registration ended with its lease lost
// (RegisterUntilLost only).
func (r *Registration) Lost() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

// Abandon stops keeping the lease alive without revoking it, as a crash
// would: the record disappears when the lease expires.
func (r *Registration) Abandon() {
	r.cancel()
}

// Close stops the keep-alives and revokes the lease, which deletes the
// member record at once. After a lost lease there is nothing to revoke.
func (r *Registration) Close(ctx context.Context) error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	lease, lost := r.lease, r.lost
	r.mu.Unlock()
	if lost {
		return nil
	}
	return etcd.Revoke(ctx, r.cli, lease)
}
