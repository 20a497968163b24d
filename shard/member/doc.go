// Package member is the member record: what a shard writes about itself
// under <prefix>members/<id> in etcd (id, address, zone, version, start and
// ready times, and its state: joining, serving or draining; only a serving
// member owns partitions), with the one encoder and the one decoder that shards,
// routers, the rebalance job and ctl all use, so none of them can read a
// malformed record differently from another.
//
// It is a leaf: no I/O, and it must never import etcd, gRPC or another
// shardlimit package.
package member
