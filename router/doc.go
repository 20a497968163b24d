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
// The router is glue around the pure steps of package request (validate,
// resolve, group by owner, refunds, merge): check.go wires a Check through
// them, decide.go calls the owners, routing.go keeps the immutable routing
// snapshot (partition table from package shardmap, a peer per member),
// breaker.go is the circuit breaker. Every call passes the Authorizer of
// package shard/auth (grants followed in etcd); the handlers of the calls a
// service may make check each service the request names (auth.go:
// mayUseAll, ownHotKeys), and admin_grants.go serves the grants. It holds
// no counters and no
// algorithms, and must never decide a check itself except by failure
// policy. It imports shard contracts (key, member, etcd, rpc, auth, creds) but never the
// shard host package or the rebalance job.
package router
