package etcd

import (
	"context"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Follower is what Follow keeps up to date with one key or prefix.
type Follower interface {
	// Reset replaces everything the follower holds with kvs, the
	// key-values listed at revision rev.
	Reset(kvs []*mvccpb.KeyValue, rev int64)
	// Apply applies the events of one watch response at revision rev.
	Apply(events []*clientv3.Event, rev int64)
}

// Target is what Follow follows.
type Target struct {
	// Name names it in logs ("members", "rules", "shard map").
	Name string
	// Key is the key, or the prefix when Prefix is set.
	Key    string
	Prefix bool
}

// listTimeout bounds one list of a Target.
const listTimeout = 3 * time.Second

// Follow lists t and hands the list to f.Reset, then watches t from the
// next revision and hands each response's events to f.Apply, until ctx
// ends. When etcd cannot be read or the watch breaks (a compacted revision,
// a lost leader), f keeps what it has while Follow waits with backoff and
// lists again: f is never called with anything that was not read, and
// never with a gap between a list and the events after it.
func Follow(ctx context.Context, cli *clientv3.Client, t Target, log *slog.Logger, f Follower) {
	var opts []clientv3.OpOption
	if t.Prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	var backoff Backoff
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		resp, err := cli.Get(lctx, t.Key, opts...)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn(t.Name+" list failed; keeping the last known", "err", err, "retry_in", backoff.Next())
			if !backoff.Wait(ctx) {
				return
			}
			continue
		}
		f.Reset(resp.Kvs, resp.Header.Revision)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range cli.Watch(wctx, t.Key, append(opts, clientv3.WithRev(resp.Header.Revision+1))...) {
			if err := wr.Err(); err != nil {
				log.Warn(t.Name+" watch broke; listing again", "err", err, "retry_in", backoff.Next())
				break
			}
			backoff.Reset() // the watch works: a later break starts over
			if len(wr.Events) > 0 {
				f.Apply(wr.Events, wr.Header.Revision)
			}
		}
		wcancel()
		// A watch that breaks at once, every time, must not make a loop of
		// lists: wait as after a failed list.
		if !backoff.Wait(ctx) {
			return
		}
	}
}
