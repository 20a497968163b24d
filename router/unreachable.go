package router

import (
	"context"
	"time"

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
// is reported while the router still reaches another shard, and the
// report is withdrawn when the circuit closes or the shard leaves. The
// rebalance leader evicts a reported shard, so that its partitions are
// decided exactly by shards the routers reach, within the lease TTL,
// instead of by policy for as long as the cut lasts.
func (r *Router) reportUnreachable() {
	after := r.opts.UnreachableAfter
	rep := eviction.NewReporter(r.etcd, etcd.Layout(r.opts.Prefix), reportLeaseTTL, r.log)
	defer rep.Close()
	tick := time.NewTicker(min(after/4, 250*time.Millisecond))
	defer tick.Stop()
	seen := map[*peer]*downSince{}
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		want := r.unreachable(seen, time.Now())
		ctx, cancel := context.WithTimeout(r.ctx, 2*time.Second)
		if err := rep.Set(ctx, want); err != nil && r.ctx.Err() == nil {
			r.log.Warn("cannot write this router's unreachable-shard reports to etcd; retrying", "err", err)
		}
		cancel()
		r.metrics.unreachable.Set(float64(rep.Reported()))
	}
}

// downSince is when a peer's circuit was first seen open, and its
// connection down while it was (zero: up).
type downSince struct{ open, disconnected time.Time }

// unreachable returns the reports the router makes at now, by shard id,
// while another peer's circuit is closed: the peers whose circuits have
// been open, with their connections down, for UnreachableAfter, or open
// for silentFactor times that. seen keeps what earlier looks saw.
func (r *Router) unreachable(seen map[*peer]*downSince, now time.Time) map[string]eviction.Report {
	rt := r.routing.Load()
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
	after := r.opts.UnreachableAfter
	for p, d := range seen {
		if !current[p] {
			delete(seen, p) // the shard left, or moved
			continue
		}
		cut := !d.disconnected.IsZero() && now.Sub(d.disconnected) >= after
		if reached > 0 && (cut || now.Sub(d.open) >= silentFactor*after) {
			want[p.member.ID] = eviction.Report{Shard: p.member.ID, Addr: p.member.Addr, Router: r.Addr(), Since: d.open, Reaches: reached}
		}
	}
	return want
}
