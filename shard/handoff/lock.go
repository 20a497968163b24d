package handoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shardlimit/shardlimit/shard/etcd"
)

// ErrBusy means another hand-off holds the lock.
var ErrBusy = errors.New("another hand-off is moving counters (a rebalance run, or a shard draining or joining)")

// Lock takes the cluster's hand-off lock under a session lease of ttl, so
// that a holder that dies releases it within ttl. It waits for the lock
// until ctx ends, or, when wait is false, returns ErrBusy at once if it is
// held. The returned unlock releases it; it is safe to call more than once.
func Lock(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, ttl time.Duration, wait bool) (unlock func(), err error) {
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(max(1, int(ttl/time.Second))), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("hand-off lock: session: %w", err)
	}
	mu := concurrency.NewMutex(sess, layout.HandoffLock())
	if wait {
		err = mu.Lock(ctx)
	} else {
		err = mu.TryLock(ctx)
	}
	if err != nil {
		_ = sess.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, ErrBusy
		}
		return nil, fmt.Errorf("hand-off lock: %w", err)
	}
	var closed bool
	return func() {
		if closed {
			return
		}
		closed = true
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = mu.Unlock(ctx)
		_ = sess.Close()
	}, nil
}
