// Package shard is a shard host: it holds the counters of the partitions it
// owns in memory and decides checks that routers send it over gRPC.
//
// A Store (store.go; memory accounting and ring sizing in memory.go,
// eviction in evict.go, expiry in sweep.go, hand-off in handoff.go) keeps one
// fixed-size state per counter key in 256 stripes, each an open-addressing
// table (sliding_log keys: a map of rings that grow with use) under its own
// mutex, so no single key serialises the host and a decision allocates
// nothing but a growing ring. Its memory, every key of every algorithm, is
// bounded in bytes (Options.MaxMemoryBytes, a 1/256 share per stripe): past
// the bound a stripe evicts its own keys, those used once or idle first. Keys are stored by the 128-bit hash
// of (service, rule, user) that package key defines: two xxhash64 sums with different seeds, the same
// in every process so that keys can move between shards; the store keeps
// the rule's algorithm in the low 3 bits, leaving 125 bits. Among 100M live keys the
// chance of any collision is about n²/2¹²⁶ ≈ 1.2·10⁻²², far below one in a
// billion.
//
// Rules arrive inline with every batch (the shard needs no rule store); the
// algorithms themselves are the pure functions of package limiter, called
// with the time the Server read once per batch.
//
// The Server registers the host in etcd under a lease (package membership)
// once it is serving and knows its grants, and deregisters on graceful
// shutdown. Only identities granted the internal role (routers, the
// rebalance job) may call it (package auth); Import checks every state it
// is handed before storing any (package limiter's CheckState).
//
// The shared contracts and plumbing live in sub-packages that routers and
// the rebalance job import too: key, member, membership, etcd, rpc, auth,
// creds. A shard never reads rules from etcd, never calls another shard, and nothing
// under shard/ imports router/ or rebalance/.
package shard
