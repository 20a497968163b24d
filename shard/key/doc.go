// Package key is the counter key that every component agrees on: its
// encoding (service NUL rule NUL user), its 128-bit hash, the 64-bit
// placement hash that routers compute and shards reuse, the partition a key
// falls in, and the bounds on the names it is made of.
//
// Routers use it to place a check, shards to store and hand off state, and
// the rebalance job to move partitions; all of them must compute the same
// values in every process, so the hash seeds never change.
//
// It is a leaf: no I/O, no clock, no allocation, and it must never import
// another shardlimit package.
package key
