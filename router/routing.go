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

// peer is the router's connection to one shard: its two lanes, each a
// queue that gathers the checks bound for the shard into calls and the
// stream that carries them.
type peer struct {
	member  member.Member
	conns   []*grpc.ClientConn // one for each lane
	client  shardlimitv1.ShardClient
	breaker *breaker
	answers atomic.Uint64 // calls it answered, in either lane: a sign of life
	lanes   [2]lane       // laneSmall, laneLarge
	log     *slog.Logger  // with the shard's id
	policy  policyLog     // checks answered without the shard, for debug
}

// The lanes of a peer, by the size of the parts they carry.
const (
	laneSmall = iota
	laneLarge
)

// smallPart is the most checks of a part (a request's share for one
// shard) that goes in its peer's small lane; a larger one goes in the
// large lane. 64 checks take a shard tens of microseconds to decide; the
// batches of a request of a thousand checks take it milliseconds, more
// when its cores are busy.
const smallPart = 64

// lane is one of a peer's two ways to its shard: a queue that gathers
// parts into calls, and the stream that carries the calls, over a
// connection of its own. A shard decides a stream's batches one at a
// time, in the order sent, so a peer keeps small parts (interactive
// requests: a few checks each) apart from large ones (bulk requests, or a
// flood): the small ones never wait behind a call of a thousand checks, in
// the queue, on the stream or in the connection (whose flow control holds
// up everything behind a large answer that the router is slow to read),
// and a large call that misses the deadline fails only its own lane's
// calls in flight. Each lane has its own bounds (CallsPerShard,
// MaxQueued).
type lane struct {
	queue   *batcher.Queue[*part]
	calls   *shardcall.Conn // nil without a client
	failing atomic.Bool     // the lane's last call failed
}

// lane returns the lane of a part of n checks.
func (p *peer) lane(n int) *lane {
	if n <= smallPart {
		return &p.lanes[laneSmall]
	}
	return &p.lanes[laneLarge]
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
	if m != nil {
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
		var clients [2]shardlimitv1.ShardClient
		var conns []*grpc.ClientConn
		for j := range clients {
			conn, err := grpc.NewClient(m.Addr, r.dialOptions()...)
			if err != nil {
				r.log.Error("cannot create a client for shard", "shard", m.ID, "addr", m.Addr, "err", err)
				clients = [2]shardlimitv1.ShardClient{}
				break
			}
			conn.Connect() // dial now, not on the first check's deadline
			clients[j] = shardlimitv1.NewShardClient(conn)
			conns = append(conns, conn)
		}
		next.peers[i] = r.newPeer(m, clients)
		next.peers[i].conns = conns
	}
	r.routing.Store(next)
	for _, p := range byID {
		time.AfterFunc(5*time.Second, p.close)
	}
}

// close closes p's connections.
func (p *peer) close() {
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// newPeer returns a peer for shard m that calls it through clients, one
// for each lane, each over a connection of its own (zero: the shard cannot
// be called, and its checks are answered by policy). The large lane's
// client also serves the Admin API's calls to the shard.
func (r *Router) newPeer(m member.Member, clients [2]shardlimitv1.ShardClient) *peer {
	p := &peer{member: m, client: clients[laneLarge], breaker: &breaker{failures: r.opts.BreakerFailures, cooldown: r.opts.BreakerCooldown},
		log: r.log.With("shard", m.ID)}
	for i := range p.lanes {
		l := &p.lanes[i]
		if clients[i] != nil {
			l.calls = shardcall.New(r.ctx, clients[i], r.opts.Deadline, p.log)
		}
		l.queue = batcher.New(batcher.Options{Calls: r.opts.CallsPerShard, MaxWaiting: r.opts.MaxQueued, MaxCall: maxCallChecks},
			func(batch []*part) { r.send(p, l, batch) }, r.shed)
	}
	return p
}

// dialOptions are the options of the router's connections to shards and
// to the rebalance leader.
func (r *Router) dialOptions() []grpc.DialOption {
	return append([]grpc.DialOption{rpc.DialCreds(r.opts.ShardTLS)}, tracing.DialOptions(r.opts.Tracer)...)
}

// closePeers closes every connection; used on stop.
func (r *Router) closePeers() {
	r.peersMu.Lock()
	defer r.peersMu.Unlock()
	if rt := r.routing.Load(); rt != nil {
		for _, p := range rt.peers {
			p.close()
		}
	}
}
