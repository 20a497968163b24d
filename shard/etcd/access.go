package etcd

import (
	"fmt"
	"slices"
)

// The components that act on etcd, each as a user of its own when etcd's
// authentication is on (Access).
const (
	Router    = "router"
	Shard     = "shard"
	Rebalance = "rebalance"
)

// Components lists the components of Access, in a fixed order.
var Components = []string{Router, Shard, Rebalance}

// Range is a range of keys: one key, or every key that starts with Key
// when Prefix is true.
type Range struct {
	Key    string
	Prefix bool
}

func (r Range) String() string {
	if r.Prefix {
		return r.Key + "*"
	}
	return r.Key
}

// Contains reports whether key is in the range.
func (r Range) Contains(key string) bool {
	if r.Prefix {
		return len(key) >= len(r.Key) && key[:len(r.Key)] == r.Key
	}
	return key == r.Key
}

// Reads is the range every component reads: the whole cluster's prefix
// (a router follows members, rules, grants and the shard map; a shard its
// grants, the map and the hand-off lock; the rebalance job all of that
// and its runs).
func (l Layout) Reads() Range { return Range{Key: l.dir(), Prefix: true} }

// Writes returns the key ranges that component (Router, Shard, Rebalance)
// writes, the only ones its etcd role may write when etcd's authentication
// is on:
//
//   - a shard its member record (members/), the hand-off lock it takes
//     to join and drain (handoff/lock/, a concurrency.Mutex's keys), and
//     its word that it stopped deciding after an eviction (eviction-acks/);
//   - the rebalance job the shard map, its kept versions, its election
//     (rebalance/election/, a concurrency.Election's keys), its run records,
//     the hand-off lock of a run, the eviction records (evictions/), and
//     the member records, whose leases it revokes when it evicts a shard
//     that routers cannot reach (etcd lets only a user who may write every
//     key of a lease revoke it);
//   - a router the rules and grants an operator changes through its Admin
//     API, and its reports of shards it cannot reach (unreachable/);
//   - a router and a shard also the shard map's one key (not its history):
//     whichever component starts first on an empty prefix creates the
//     record that fixes the cluster's partition count (mapstore.Partitions,
//     a create-if-absent transaction; etcd's roles cannot say "create
//     only", and a router's grants and a shard's member records already
//     reach as far).
//
// It panics on another component: the list is fixed.
func (l Layout) Writes(component string) []Range {
	switch component {
	case Router:
		return []Range{{l.Rules(), true}, {l.Grants(), true}, {l.Unreachable(), true}, {l.ShardMap(), false}}
	case Shard:
		return []Range{{l.Members(), true}, {l.HandoffLock() + "/", true}, {l.EvictionAcks(), true}, {l.ShardMap(), false}}
	case Rebalance:
		return []Range{{l.ShardMap(), false}, {l.ShardMapHistory(), true}, {l.ElectionCandidates(), true}, {l.Runs(), true}, {l.HandoffLock() + "/", true},
			{l.Evictions(), true}, {l.Members(), true}}
	}
	panic(fmt.Sprintf("etcd: no access for component %q (want one of %v)", component, Components))
}

// MayWrite reports whether component may write key.
func (l Layout) MayWrite(component, key string) bool {
	return slices.ContainsFunc(l.Writes(component), func(r Range) bool { return r.Contains(key) })
}
