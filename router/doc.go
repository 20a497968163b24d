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
// until a probe succeeds, so a dead shard costs no latency. The circuit
// opens only for a shard that answers nothing at all: after failed calls,
// the router sends it a liveness check (a call with no checks), and a
// shard that answers it is alive, only late (an oversubscribed machine),
// so its failed calls answer their own checks by policy and nothing more;
// a failed probe is checked the same way (breaker.go says why), and so is
// a shard whose connection is ready again after it closed (a cut network
// heals: package redial closes and redials the connection), so that its
// answer closes the circuit at once. When the router
// itself is overloaded (too many checks waiting for a shard, or one waiting
// too long), it sheds checks the same way but flagged overload and counted
// under its own result, and the shard's circuit never hears of it. A
// shard's queue is shared fairly among services (the queue's classes,
// numbered per rule set in router.go): a flooding service's checks are
// shed before another service's wait.
//
// Before any shard is called, the over-limit cache (package overlimit,
// wired by overlimit.go) answers the checks of keys known to be over their
// limit: a shard's own denial, repeated with its waits shortened until its
// retry time, so a flooding user costs its shard about one decision per
// retry period and stays denied while that shard is down. The router holds
// only denials that the shard would repeat exactly (overlimit.Exact), for
// the rule version they were decided under: a changed rule's are never
// used. A refund forgets the key's entry. It can differ from the shard
// only after a refund by another router or a Reset on the shard, until
// the retry time. The other rules of a check with a held denial still go
// to their shards (and are refunded), so the merged answer is the one
// every rule's shard would give.
//
// The router is glue around the pure steps of package request (validate,
// resolve, group by owner, refunds, merge): check.go wires a Check through
// them, decide.go hands the owners' shares to their queues, call.go makes
// one call for a queue's batch, routing.go keeps the immutable routing
// snapshot (partition table from package shardmap, a peer per member),
// breaker.go is the circuit breaker, liveness.go the liveness check that
// decides whether a failing shard's circuit opens or a reconnected one's
// closes, overlimit.go consults and fills the
// over-limit cache, tracing.go makes the spans of a traced request (its
// waits for shards, and the calls that carry them, linked to every request
// they carry) when Options.Tracer is set, and debuglog.go writes the debug
// lines, built only when debug is on and never one per check. With
// Options.HTTPListen, Start also serves the HTTP/JSON API of package
// httpapi over the same services, authorizer, TLS config and connection
// bound. Every call passes the Authorizer of package shard/auth
// (grants followed in etcd); the handlers of the calls a service may make
// check each service the request names (auth.go: mayUseAll, ownHotKeys),
// admin_grants.go serves the grants, and admin_runstream.go streams a
// rebalance run by watching its record in etcd. It holds no counters and no
// algorithms, and must never decide a check itself except by failure
// policy or by repeating a shard's denial from the over-limit cache. It
// imports shard contracts (key, member, etcd, rpc, auth, creds, limiter's
// rule parameters) but never the shard host package or the rebalance job.
package router
