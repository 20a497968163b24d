// Package router is the stateless front of shardlimit: it serves the public
// RateLimiter API, resolves each check's rule, maps the check's counter key
// to its partition and the partition to its owner shard through the
// shard map, calls every owner once per request in parallel with a short
// deadline, and merges the answers in request order.
//
// When an owner is unreachable or late, its checks are answered by each
// rule's failure policy (allow unless the rule says deny), flagged as such,
// and counted; a per-shard circuit breaker then answers by policy at once
// until a probe succeeds, so a dead shard costs no latency.
//
// The router is glue: it holds no counters and no algorithms. It must never
// decide a check itself except by failure policy.
package router
