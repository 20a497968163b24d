package router

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/eviction"
)

// reportLeaseTTL is the lease of a router's unreachable-shard reports: a
// router that dies takes its reports with it this long after.
const reportLeaseTTL = 5 * time.Second

// silentFactor: a shard that holds its connection but answers nothing
// (stopped, or stuck) is reported after this many times UnreachableAfter.
// A process that stalls stops its own lease's keep-alives too, so a stall
// longer than its lease ends in a takeover anyway, and one shorter must
// not end in an eviction, whose takeover from a shard that answers
// nothing counts from zero; a shard that the network cut off is seen at
// once, as its connection breaks (package redial's unacknowledged
// timeout) and cannot be made again.
const silentFactor = 10

// reportUnreachable keeps the router's reports of shards it cannot reach
// in etcd (package eviction), until the router stops: a shard whose
// circuit is open and whose connection is down has been so for
// UnreachableAfter (silentFactor times that when its connection stays up)
// is reported while the router still reaches another shard and etcd
// (counted from when it last reached etcd again), and the
// report is withdrawn when the circuit closes or the shard leaves. The
// rebalance leader evicts a reported shard, so that its partitions are
// decided exactly by shards the routers reach, within the lease TTL,
// instead of by policy for as long as the cut lasts.
func (r *Router) reportUnreachable() {
	after := r.opts.UnreachableAfter
	layout := etcd.Layout(r.opts.Prefix)
	rep := eviction.NewReporter(r.etcd, layout, reportLeaseTTL, r.log)
	defer rep.Close()
	tick := time.NewTicker(min(after/4, 250*time.Millisecond))
	defer tick.Stop()
	seen := map[*peer]*downSince{}
	reach := etcdReach{back: time.Now()}
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		if len(seen) > 0 {
			reach.probe(r.ctx, r.etcd.Get, layout.Unreachable(), time.Now)
		}
		want := unreachable(r.routing.Load(), seen, time.Now(), reach.since(), after, r.Addr())
		ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
		if err := rep.Set(ctx, want); err != nil && r.ctx.Err() == nil {
			r.log.Warn("cannot write this router's unreachable-shard reports to etcd; retrying", "err", err)
		}
		cancel()
		r.metrics.unreachable.Set(float64(rep.Reported()))
	}
}

// etcdReach is whether the router reaches etcd, asked while some shard's
// circuit is open: a router that cannot is likely on the wrong side of a
// split, and the shards it cannot reach then are no evidence against them.
type etcdReach struct {
	down bool
	back time.Time // when etcd answered after the last time it did not
}

// etcdProbe bounds the question, within the report loop's tick.
const etcdProbe = 500 * time.Millisecond

// probe asks etcd for one key (count only) and records the answer.
func (e *etcdReach) probe(ctx context.Context, get func(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error), key string, now func() time.Time) {
	ctx, cancel := context.WithTimeout(ctx, etcdProbe)
	defer cancel()
	_, err := get(ctx, key, clientv3.WithCountOnly())
	switch {
	case err != nil:
		e.down = true
	case e.down:
		e.down, e.back = false, now()
	}
}

// since is the time from which the router has reached etcd without a
// failed probe; zero while it does not.
func (e *etcdReach) since() time.Time {
	if e.down {
		return time.Time{}
	}
	return e.back
}

// downSince is when a peer's circuit was first seen open, and its
// connection down while it was (zero: up).
type downSince struct{ open, disconnected time.Time }

// unreachable returns the reports that a router at addr, routing by rt,
// makes at now, by shard id,
// while another peer's circuit is closed and the router reaches etcd
// (etcdSince, zero while it does not): the peers whose circuits have been
// open, with their connections down, for UnreachableAfter, or open for
// silentFactor times that, counted from no earlier than etcdSince. A
// router split off with a shard from etcd and the other shards sees them
// unreachable for as long as the split lasts; counted from the heal, its
// connections are made again before the report is due, instead of the
// report going out with the first write to etcd and evicting a healthy
// shard (the robustness suite, seed 777 one fault at a time). seen keeps
// what earlier looks saw.
func unreachable(rt *routing, seen map[*peer]*downSince, now, etcdSince time.Time, after time.Duration, addr string) map[string]eviction.Report {
	if rt == nil {
		return nil
	}
	current := make(map[*peer]bool, len(rt.peers))
	reached := 0
	for _, p := range rt.peers {
		current[p] = true
		if !p.breaker.open() {
			delete(seen, p)
			if !p.failing.Load() { // its last call succeeded (or none failed yet)
				reached++
			}
			continue
		}
		d := seen[p]
		if d == nil {
			d = &downSince{open: now}
			seen[p] = d
		}
		switch connected := p.conn != nil && p.conn.GetState() == connectivity.Ready; {
		case connected:
			d.disconnected = time.Time{}
		case d.disconnected.IsZero():
			d.disconnected = now
		}
	}
	want := map[string]eviction.Report{}
	for p, d := range seen {
		if !current[p] {
			delete(seen, p) // the shard left, or moved
			continue
		}
		if etcdSince.IsZero() {
			continue
		}
		cut := !d.disconnected.IsZero() && now.Sub(later(d.disconnected, etcdSince)) >= after
		if reached > 0 && (cut || now.Sub(later(d.open, etcdSince)) >= silentFactor*after) {
			want[p.member.ID] = eviction.Report{Shard: p.member.ID, Addr: p.member.Addr, Router: addr, Since: d.open, Reaches: reached}
		}
	}
	return want
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
