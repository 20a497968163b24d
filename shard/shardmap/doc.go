// Package shardmap maps keys to partitions and partitions to their owner
// shard.
//
// A key's partition is key.Partition: the placement hash of its
// (service, rule, user) key (package shard/key) mod the partition count. Owners come
// from github.com/buraksezer/consistent: a bounded-load consistent ring over
// the live members, hashed with xxhash, so a membership change moves few
// partitions and no member owns more than Load × the mean. Build computes the
// whole partition → owner table once per change; lookups read that immutable
// Table without locks, so routers swap tables atomically instead of sharing
// the ring's read lock on the hot path.
//
// It is pure: no etcd, no network, no clock. Members are member.Member
// records (ids and addresses); it must never import etcd, gRPC or a
// component package.
package shardmap
