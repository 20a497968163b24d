// Package key is the counter key that every component agrees on: its
// encoding (service NUL rule NUL user), its 128-bit hash, the 64-bit
// placement hash that routers compute and shards reuse, the partition a key
// falls in, and the bounds on the names it is made of.
//
// Routers use it to place a check, and shards and the rebalance job to find
// a key's partition; all of them must compute the same values in every
// process, so the hash seeds never change. Because they are public, anyone
// can make many names with one placement hash, or even one Make: the
// hashes place keys, they never identify a counter. A shard compares the
// encoding (Append) whole, and any process-local table hashes it under a
// secret seed of its own (hash/maphash).
//
// It is a leaf: no I/O, no clock, no allocation, and it must never import
// another shardlimit package.
package key
