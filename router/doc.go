// Package router is the stateless front of shardlimit: it serves the public
// RateLimiter API, resolves each check's rule, maps the check's counter key
// to its partition and the partition to its owner shard through the
// shard map, and hands each owner's share of a request to that shard's
// queue (package batcher): the checks of concurrent requests bound for one
// shard leave together in one batch, over one stream per shard (package
// shardcall), with a short deadline that counts from when the batch is
// sent. It merges the answers in request order.
//
// When an owner is unreachable or late, its checks are answered by each
// rule's failure policy (allow unless the rule says deny), flagged as such,
// and counted; a per-shard circuit breaker then answers by policy at once
// until a probe succeeds, so a dead shard costs no latency. When the router
// itself is overloaded (too many checks waiting for a shard, or one waiting
// too long), it sheds checks the same way but flagged overload and counted
// under its own result, and the shard's circuit never hears of it.
//
// The router is glue around the pure steps of package request (validate,
// resolve, group by owner, refunds, merge): check.go wires a Check through
// them, decide.go hands the owners' shares to their queues, call.go makes
// one call for a queue's batch, routing.go keeps the immutable routing
// snapshot (partition table from package shardmap, a peer per member),
// breaker.go is the circuit breaker. It holds no counters and no
// algorithms, and must never decide a check itself except by failure
// policy. It imports shard contracts (key, member, etcd, rpc) but never the
// shard host package or the rebalance job.
package router
