package rebalance

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/shardlimit/shardlimit/shard/eviction"
)

// evictLook is how often the leader looks again at the routers' reports
// while some are in etcd (an eviction that Decide refused may become
// possible: the eviction in force expired); without reports it waits for
// the watch.
const evictLook = 500 * time.Millisecond

// evictUnreachable evicts the shards that routers report unreachable
// (package eviction), while this instance leads (ctx): it looks at the
// reports each time they change, and every evictLook while there are any.
func (j *Job) evictUnreachable(ctx context.Context, e *concurrency.Election) {
	changed := j.etcd.Watch(clientv3.WithRequireLeader(ctx), j.layout().Unreachable(), clientv3.WithPrefix())
	tick := time.NewTicker(evictLook)
	defer tick.Stop()
	pending := true // look once at the start: reports may predate this leader
	for {
		if pending {
			pending = j.evictOnce(ctx, e)
		}
		select {
		case <-ctx.Done():
			return
		case wr, ok := <-changed:
			if !ok || wr.Err() != nil {
				// A broken watch: look on every tick until it is made again.
				changed = j.etcd.Watch(clientv3.WithRequireLeader(ctx), j.layout().Unreachable(), clientv3.WithPrefix())
			}
			pending = true
		case <-tick.C:
		}
	}
}

// evictOnce reads the reports, members and evictions, revokes the leases
// of evicted shards that are still registered, and evicts the shard
// Decide picks, if any. It reports whether there is reason to look again
// (reports in etcd, or etcd could not be read).
func (j *Job) evictOnce(ctx context.Context, e *concurrency.Election) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, bad, err := eviction.Read(ctx, j.etcd, j.layout())
	if err != nil {
		j.log.Warn("cannot read the routers' unreachable-shard reports; looking again", "err", err)
		return true
	}
	for _, err := range bad {
		j.log.Warn("ignoring a malformed record", "err", err)
	}
	for _, m := range st.Stale() {
		if err := eviction.Revoke(ctx, j.etcd, m); err != nil {
			j.log.Warn("cannot revoke the lease of an evicted shard; retrying", "shard", m.ID, "err", err)
		}
	}
	v := eviction.Decide(st.Reports, st.Members, st.Evicting())
	if !v.Evict() {
		return len(st.Reports) > 0
	}
	rec, err := eviction.Evict(ctx, j.etcd, j.layout(), v, j.opts.EvictHold, j.opts.ID, time.Now(),
		clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev()))
	switch {
	case errors.Is(err, eviction.ErrChanged):
		return true
	case err != nil && rec.Shard == "":
		j.log.Warn("cannot evict an unreachable shard; retrying", "shard", v.Member.ID, "err", err)
		return true
	}
	j.metrics.evictions.Inc()
	j.log.Warn("evicted a shard that routers cannot reach: its lease is revoked, live shards take its partitions over, and it may join again once the hold ends",
		"shard", rec.Shard, "addr", rec.Addr, "routers", rec.Routers, "hold", rec.Hold, "revoke_err", err)
	return true
}
