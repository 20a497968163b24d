package router

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/shardmap"
	"github.com/shardlimit/shardlimit/shard/membership"
)

// peer is the router's connection to one shard.
type peer struct {
	member  membership.Member
	conn    *grpc.ClientConn
	client  shardlimitv1.ShardClient
	breaker *breaker
}

// routing is an immutable snapshot: the partition table and a peer for each
// of its members, at the same index. The router swaps whole snapshots.
type routing struct {
	table *shardmap.Table
	peers []*peer
}

// setMembers builds a new snapshot for members, reusing the connections of
// members that stayed at the same address, and closes the others after a
// grace period so calls in flight can finish.
func (r *Router) setMembers(members []membership.Member) {
	table, err := shardmap.Build(r.opts.Ring, members)
	if err != nil {
		r.log.Error("cannot build the partition table; keeping the previous one", "err", err)
		return
	}
	r.peersMu.Lock()
	defer r.peersMu.Unlock()
	old := r.routing.Load()
	byID := map[string]*peer{}
	if old != nil {
		for _, p := range old.peers {
			byID[p.member.ID] = p
		}
	}
	next := &routing{table: table, peers: make([]*peer, len(table.Members()))}
	for i, m := range table.Members() {
		if p := byID[m.ID]; p != nil && p.member.Addr == m.Addr {
			next.peers[i] = p
			delete(byID, m.ID)
			continue
		}
		conn, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			r.log.Error("cannot create a client for shard", "shard", m.ID, "addr", m.Addr, "err", err)
			conn = nil
		}
		p := &peer{member: m, conn: conn, breaker: &breaker{failures: r.opts.BreakerFailures, cooldown: r.opts.BreakerCooldown}}
		if conn != nil {
			conn.Connect() // dial now, not on the first check's deadline
			p.client = shardlimitv1.NewShardClient(conn)
		}
		next.peers[i] = p
	}
	r.routing.Store(next)
	for _, p := range byID {
		if p.conn != nil {
			time.AfterFunc(5*time.Second, func() { _ = p.conn.Close() })
		}
	}
	r.metrics.members.Set(float64(len(members)))
	r.log.Info("shard members changed", "members", len(members), "partitions", table.Partitions())
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
