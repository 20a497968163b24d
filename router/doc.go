// Package router is the stateless front of shardlimit: the Check path. It
// serves the public RateLimiter API (and, through package envoy, Envoy's
// rate limit API; through package httpapi, both as HTTP/JSON), decides
// each check on the one shard that owns its counter, and merges the
// answers in request order. Its CheckStream serves the same Check path
// message by message on one stream (checkstream.go), for callers such as
// the Go client's Options.Stream. The `shardlimit router` command starts
// it; tests start it through package clustertest.
//
// # A check
//
// The router is glue around the pure steps of package request: validate
// the request, resolve each check's rules, map each counter key to its
// partition and the partition to its owner shard through the routing
// snapshot (the partition table of package shardmap over the live members
// and the shard map, with a peer per member, swapped whole when either
// changes), group the checks by owner, refund the hits of a check that
// another rule denied, and merge. Each owner's share goes to that shard's
// queue (package batcher): the checks of concurrent requests bound for one
// shard leave together in one batch (each call yields first to the
// goroutines ready to run, so that under load the requests about to join
// it do), over one stream per shard (package shardcall), with a short
// deadline that counts from when the batch is sent.
//
// # Failure and overload
//
// When an owner is unreachable or late, its checks are answered by each
// rule's failure policy (allow unless the rule says deny), flagged as such,
// and counted; a per-shard circuit breaker then answers by policy at once
// until a probe succeeds, so a dead shard costs no latency. The circuit
// opens only for a shard that answers nothing at all: after failed calls,
// the router sends it a liveness check (a call with no checks), and a
// shard that answers it is alive, only late (an oversubscribed machine),
// so its failed calls answer their own checks by policy and nothing more.
// A failed probe is checked the same way, and so is a shard whose
// connection is ready again after it closed (a cut network heals: package
// redial closes and redials the connection), so that its answer closes
// the circuit at once. A shard whose circuit stays open with its
// connection down is reported unreachable in etcd, for the rebalance
// leader to evict (package eviction).
//
// When the router itself is overloaded (too many checks waiting for a
// shard, or one waiting too long), it sheds checks the same way but
// flagged overload and counted under its own result, and the shard's
// circuit never hears of it. A shard's queue is shared fairly among
// services (one class per service of the rule set): a flooding service's
// checks are shed before another service's wait.
//
// # The over-limit cache
//
// Before any shard is called, the over-limit cache (package overlimit)
// answers the checks of keys known to be over their limit: a shard's own
// denial, repeated with its waits shortened until its retry time, so a
// flooding user costs its shard about one decision per retry period and
// stays denied while that shard is down. The router holds only denials
// that the shard would repeat exactly (overlimit.Exact), for the rule
// version they were decided under: a changed rule's are never used. A
// refund forgets the key's entry. It can differ from the shard only after
// a refund by another router or a Reset on the shard, until the retry
// time. The other rules of a check with a held denial still go to their
// shards (and are refunded), so the merged answer is the one every rule's
// shard would give.
//
// # Around the path
//
// Every call passes the Authorizer of package shard/auth (grants followed
// in etcd); the handlers of the calls a service may make check each
// service the request names. The Admin API (package admin) is served on
// the same port and sees the router only through admin.Router. With
// Options.Tracer set, a traced request gets spans for its waits for
// shards and for the calls that carry them, linked to every request they
// carry; at debug, the router logs what changed in its members, table and
// rules, never one line per check. Options embeds component.Config, what
// every server shares.
//
// It holds no counters and no algorithms, and must never decide a check
// itself except by failure policy or by repeating a shard's denial from
// the over-limit cache. It imports shard contracts (key, member, etcd,
// rpc, auth, limiter's rule parameters) but never the shard host package
// or the rebalance job.
package router
