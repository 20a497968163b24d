// Package shardmap maps keys to partitions and partitions to their owner
// shard.
//
// A key's partition is key.Partition: the placement hash of its
// (service, rule, user) key (package shard/key) mod the partition count. Owners come
// from github.com/buraksezer/consistent: a bounded-load consistent ring over
// the serving members (member.Member.Serving: a joining or draining member
// owns nothing), hashed with xxhash, so a membership change moves few
// partitions and no member owns more than Load × the mean. Build computes the
// whole partition → owner table once per change; lookups read that immutable
// Table without locks, so routers swap tables atomically instead of sharing
// the ring's read lock on the hot path.
//
// Resolve lays the published Map's pins over the ring; InForce does both.
// Routers, the rebalance job and shards (to find where a partition goes
// when they drain, and what they gain when they join) all compute owners
// through these, so they agree for the same etcd contents.
//
// It is pure: no etcd, no network, no clock. Members are member.Member
// records (ids and addresses); it must never import etcd, gRPC or a
// component package.
package shardmap
