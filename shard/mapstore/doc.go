// Package mapstore keeps the shard map in etcd: the current map at
// <prefix>shardmap, written only by compare-and-swap on its revision, and
// the last Keep versions at <prefix>shardmap-history/<version> (keys from
// etcd.Layout), written in
// the same transaction. Routers Watch the map; the rebalance job and
// operators' rollbacks Publish.
//
// It is only the etcd edge; the map and the owner function are in package
// shardmap.
package mapstore
