package router

import (
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/batcher"
	"github.com/shardlimit/shardlimit/router/shardcall"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/shardmap"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// peer is the router's connection to one shard, with the queue that
// gathers the checks bound for it into calls, and the stream that carries
// them.
type peer struct {
	member  member.Member
	conn    *grpc.ClientConn
	client  shardlimitv1.ShardClient
	breaker *breaker
	calls   *shardcall.Conn // over client; nil with it
	queue   *batcher.Queue[*part]
	failing atomic.Bool  // the last call failed
	log     *slog.Logger // with the shard's id
	policy  policyLog    // checks answered without the shard, for debug
}

// routing is an immutable snapshot: the partition table in force (the ring
// over the live members with the shard map's pins), a peer for each member
// at the same index, and the map it came from. The router swaps whole
// snapshots.
type routing struct {
	table *shardmap.Table
	peers []*peer
	m     *shardmap.Map
}

// setMembers rebuilds the routing for a new member list.
func (r *Router) setMembers(members []member.Member) {
	r.peersMu.Lock()
	defer r.peersMu.Unlock()
	r.logMembers(r.members, members)
	r.members = members
	r.rebuild()
	r.metrics.members.Set(float64(len(members)))
	r.metrics.memberChanges.Inc()
	r.log.Info("shard members changed", "members", len(members))
}

// setMap rebuilds the routing for a new shard map.
func (r *Router) setMap(m *shardmap.Map) {
	r.peersMu.Lock()
	defer r.peersMu.Unlock()
	if m != nil {
		if err := m.Validate(r.opts.Ring.Partitions); err != nil {
			r.log.Error("ignoring a shard map that does not fit; the ring decides alone", "err", err)
			m = nil
		}
	}
	r.shardMap = m
	r.rebuild()
	if m != nil && m.Version > 0 { // version 0 records the partition count only
		r.metrics.mapVersion.Set(float64(m.Version))
		r.metrics.mapWritten.Store(m.WrittenAt.UnixNano())
		r.log.Info("shard map in force", "version", m.Version, "pinned", m.Pinned(), "reason", m.Reason)
	}
}

// rebuild builds a new snapshot from the current members and map, reusing
// the connections of members that stayed at the same address, and closes
// the others after a grace period so calls in flight can finish. The caller
// holds peersMu.
func (r *Router) rebuild() {
	ring, err := shardmap.Build(r.opts.Ring, r.members)
	if err != nil {
		r.log.Error("cannot build the partition table; keeping the previous one", "err", err)
		return
	}
	table := shardmap.Resolve(ring, r.shardMap)
	old := r.routing.Load()
	var prev *shardmap.Table
	if old != nil {
		prev = old.table
	}
	r.logTable(prev, table)
	byID := map[string]*peer{}
	if old != nil {
		for _, p := range old.peers {
			byID[p.member.ID] = p
		}
	}
	next := &routing{table: table, peers: make([]*peer, len(table.Members())), m: r.shardMap}
	for i, m := range table.Members() {
		if p := byID[m.ID]; p != nil && p.member.Addr == m.Addr {
			next.peers[i] = p
			delete(byID, m.ID)
			continue
		}
		next.peers[i] = r.dialPeer(m)
	}
	r.routing.Store(next)
	for _, p := range byID {
		if p.conn != nil {
			time.AfterFunc(5*time.Second, func() { _ = p.conn.Close() })
		}
	}
}

// dialPeer returns a peer for shard m over a new connection to it, dialed
// now (not on the first check's deadline), whose readiness after a loss
// is checked (checkOnReconnect) until the connection is closed.
func (r *Router) dialPeer(m member.Member) *peer {
	conn, err := grpc.NewClient(m.Addr, r.dialOptions()...)
	if err != nil {
		r.log.Error("cannot create a client for shard", "shard", m.ID, "addr", m.Addr, "err", err)
		return r.newPeer(m, nil)
	}
	conn.Connect()
	p := r.newPeer(m, shardlimitv1.NewShardClient(conn))
	p.conn = conn
	go r.checkOnReconnect(p)
	return p
}

// newPeer returns a peer for shard m that calls it through client (nil:
// the shard cannot be called, and its checks are answered by policy).
func (r *Router) newPeer(m member.Member, client shardlimitv1.ShardClient) *peer {
	p := &peer{member: m, client: client, breaker: &breaker{failures: r.opts.BreakerFailures, cooldown: r.opts.BreakerCooldown},
		log: r.log.With("shard", m.ID)}
	if client != nil {
		p.calls = shardcall.New(r.ctx, client, r.opts.Deadline, p.log)
	}
	p.queue = batcher.New(batcher.Options{Calls: r.opts.CallsPerShard, MaxWaiting: r.opts.MaxQueued, MaxCall: maxCallChecks},
		func(batch []*part) { r.send(p, batch) }, r.shed)
	return p
}

// dialOptions are the options of the router's connections to shards and
// to the rebalance leader.
func (r *Router) dialOptions() []grpc.DialOption {
	return append(rpc.DialOptions(r.opts.ShardTLS), tracing.DialOptions(r.opts.Tracer)...)
}

// closePeers closes every connection; used on stop.
func (r *Router) closePeers() {
	r.peersMu.Lock()
	defer r.peersMu.Unlock()
	if rt := r.routing.Load(); rt != nil {
		for _, p := range rt.peers {
			if p.conn != nil {
				_ = p.conn.Close()
			}
		}
	}
}
