// Package shard is a shard host: it holds the counters of the partitions it
// owns in memory and decides checks that routers send it over gRPC.
//
// A Store (store.go; eviction in evict.go, expiry in sweep.go, hand-off in
// handoff.go) keeps one fixed-size state per counter key in 256 stripes, each an
// open-addressing table (sliding_log keys: a map of rings) under its own
// mutex, so no single key serialises the host and a
// decision allocates nothing. Keys are stored by the 128-bit hash
// of (service, rule, user) that package key defines: two xxhash64 sums with different seeds, the same
// in every process so that keys can move between shards; the store keeps
// the rule's algorithm in the low 3 bits, leaving 125 bits. Among 100M live keys the
// chance of any collision is about n²/2¹²⁶ ≈ 1.2·10⁻²², far below one in a
// billion.
//
// Rules arrive inline with every batch (the shard needs no rule store), over
// unary Decide or, from routers, a DecideStream that each keeps open; a
// batch is decided at once (decide.go, batch.go): one clock reading, the
// load and hot-key bookkeeping once per batch, and each key's placement hash
// taken from the router (checked against the check's partition), so that
// only the key's other half is hashed here. The algorithms themselves are
// the pure functions of package limiter.
//
// The Server registers the host in etcd under a lease (package membership)
// once it is serving, and deregisters on graceful shutdown.
//
// The shared contracts and plumbing live in sub-packages that routers and
// the rebalance job import too: key, member, membership, etcd, rpc. A
// shard never reads rules from etcd, never calls another shard, and nothing
// under shard/ imports router/ or rebalance/.
package shard
