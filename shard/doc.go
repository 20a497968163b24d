// Package shard is a shard host: it holds the counters of the partitions it
// owns in memory and decides the checks that routers send it over gRPC.
// The `shardlimit shard` command starts it (Start); tests start it through
// package clustertest.
//
// # The store
//
// A Store keeps one fixed-size state per counter key in 256 stripes, each
// an open-addressing table (sliding_log keys: a map of rings that grow
// with use) under its own mutex, so no single key serialises the host and
// a decision allocates nothing but a growing ring or key arena (and a new
// sliding_log key its key). Its memory, every key of every algorithm, is
// bounded in bytes (StoreBytes, half of Options.MaxMemoryBytes, the
// process's bound; a 1/256 share per stripe): past the bound a stripe
// drops its own keys, those fresh again first, then those used once or
// idle. A sweep drops the keys that are fresh again, one stripe at a time.
//
// A counter is its whole key: the rule's algorithm, then service NUL rule
// NUL user, held in its table's arena and compared byte for byte, so two
// different users never share a counter, whatever names they choose (a
// 128-bit hash, which package key's xxhash once was, can be collided at
// will). A key's stripe and slot come from hash/maphash under a seed drawn
// when the process starts (and a salt per table), never from the placement
// hash that routers compute, so no caller can aim keys at one stripe or
// slot; an insert that lands more than maxProbe slots from its home
// rehashes the table under a new salt. Placement across partitions stays
// predictable (xxhash of the key modulo the partition count, which every
// router and shard must agree on), and that is harmless: users crowded
// into one partition spread over the stripes and slots as the same number
// of random users would, so a flood of one partition costs what the same
// volume of random users costs, and it shows as that partition's load, for
// the rebalance job to move. Hand-offs carry the stored key (KeyState.key)
// beside the old 128-bit hash, which shards of earlier versions read.
//
// # Deciding
//
// Rules arrive inline with every batch (the shard needs no rule store),
// over a DecideStream that each router keeps open (or unary Decide:
// forwarded checks, liveness probes).
// A batch is decided at once: one clock reading, the load and hot-key
// bookkeeping once per batch, and each key's placement hash taken from the
// router (checked against the check's partition), so that only the key's
// other half is hashed here. The algorithms themselves are the pure
// functions of package limiter. A batch that carries a router's trace
// context gets a span in that trace when the shard traces
// (Options.Tracer).
//
// The shard API's other calls are the operator's, through the router's
// Admin API, and never on the decision path: Stats (load per partition,
// the hottest keys of package hotkeys, the store's counts), Limited (the
// limited-user log of package episodes) and Reset (forget one counter).
//
// # Life in the cluster
//
// The Server's life is made of hand-offs of package handoff: Start
// registers it in etcd as joining (package membership), pulls the counters
// of the partitions it gains from their owners, then again under a fence,
// and turns serving; Stop drains (hands every partition to its next owner,
// then again under a fence, turns draining, then deregisters) within
// DrainTimeout; after a lost lease it gives its partitions' counters back
// to their new owners and joins again, so it never serves stale counters.
// The owners come from the one owner function, package shardmap. The shard
// follows the owner table as routers do and decides only the partitions
// package ownership says it owns now: a partition it gains without a
// hand-off (its owner's lease was lost, or the ring moved it) is pending,
// its checks answered not_decided, until it has pulled the partition from
// the previous owner with a fence (that owner stops deciding it first), or
// found that owner dead (from zero at once; a process started since at
// its address, which says when it started, counts as dead) or stalled
// (from zero once it sent nothing for TakeoverTimeout), after a sweep of
// every other member with the same fenced pull (one may decide it still).
//
// Counters stream between shards through the shard API's ExportStream and
// Pull: the export side is the source's, the pull side the destination's.
// The hand-off's steps, in order, and a partition's states are package
// partition's, stated there once. Between a planned hand-off's first copy
// and its final, fenced one,
// the shard journals the keys of the moving partitions that change, so
// that the final copy reads only those; from the fence on it forwards the
// partitions' checks to their next owner and answers with its decisions,
// and the next owner holds forwarded checks until the final copy has been
// merged.
//
// # Trust
//
// Only identities granted the internal role (routers, the rebalance job,
// other shards) may call it (package auth); Import checks every state it
// is handed before storing any (package limiter's CheckState). A shard
// never reads rules from etcd, and calls another shard only to move
// counters, to forward the checks of partitions it handed over, or to ask
// whether its peers still reach it when etcd does not confirm its lease.
//
// # The shared layer
//
// Most of shard/'s sub-packages are not the shard host's: routers, the
// rebalance job, ctl and the test harnesses import them too. They are
// the contracts every component agrees on (key: the counter key, its
// hash and partition; member: the member record; shardmap: the one owner
// function; mapstore: the shard map in etcd; limiter: the algorithms and
// their state; handoff: the hand-off protocol that shards and the
// rebalance job both drive; eviction: how an unreachable shard is
// reported, evicted and held out) and the plumbing every server runs on
// (component: the options every server shares; etcd: its key layout,
// dialing and the one watch loop; membership; rpc: the one gRPC server
// and dialer; auth and creds: who may call what, with which
// certificates and tokens; tracing; poll and metrictest, for tests).
// Only episodes, hotkeys, load, logwindow and ownership are the host's
// own.
//
// They sit here, and not beside the component that reads them most,
// because the top level is fixed to the components (cmd, router, shard,
// rebalance, proto, deploy) and shards are the bottom of the import
// graph: routers and the rebalance job import shard/ packages, and
// nothing under shard/ imports router/ or rebalance/. A contract placed
// under router/ would make the shard import the router; under shard/,
// every component imports it without an arrow running back up. So a
// package here is not shard-specific by its place alone: its own doc
// says who calls it, and none of them explains its place again. Each
// must never import a component's host (shard, router, rebalance).
package shard
