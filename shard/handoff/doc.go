// Package handoff moves the counters of partitions from one shard to
// another: the one hand-off protocol that the rebalance job's planned moves,
// a draining shard and a joining shard all use, so that no membership
// change a shard or the job plans resets anyone's quota.
//
// # Protocol: copy, copy again under a fence, switch, settle, drop
//
// Move takes the pairs (from, to, partitions) whose owner changes, which
// Pairs computes from the owners before and after the change (both from
// the one owner function, shardmap.InForce), and:
//
//  1. copies every pair: the destination pulls from the source, shard to
//     shard (the shard API's Pull); the source starts a journal of the
//     keys of those partitions that change from then on, and streams the
//     partitions' keys in chunks bounded in keys and bytes
//     (ExportStream); the destination merges each chunk as it arrives, so
//     any number of keys moves and no one in between decodes them;
//  2. copies every pair again, the final copy (PullRequest.final): the
//     destination stops deciding the partitions until this copy is merged
//     (ownership.Receiving); the source fences them (it decides them no
//     more, and a batch in flight ends first) and from then on forwards
//     their checks to the destination, then streams only the keys its
//     journal recorded for this hand-off (the whole partitions if the
//     pair's first copy failed, or the journal ended meanwhile: it
//     overflowed, or a fence, a drop or another hand-off ended it);
//     forwarded checks wait at the destination until the copy is merged;
//  3. switches: the caller's step after which routers send the partitions
//     to their new owners (the job publishes a map; a draining shard
//     writes its member record as draining; a joining one as serving);
//  4. waits Settle for every router to follow etcd; a router that has not
//     switched yet still reaches the source, which forwards;
//  5. drops the partitions at the sources (when Drop is set), which also
//     ends the forwarding; a draining shard exits instead.
//
// Options.OnStep is told as each step starts, and Options.OnCopied as each
// pair's copy ends, so that a caller (the rebalance job) records progress.
//
// Exactness. At every moment each moving partition is decided in one place:
// by the source until its fence, then by the destination (directly, or
// through the source's forward), which holds every hit the source counted
// (the journal names every key a batch decided before the fence). So no
// user gets past their limit and nobody's quota resets, whether they sit at
// their limit or consume through the move. An import merges by the more
// restrictive state (limiter.Merge), so the final copy never gives quota
// back.
//
// What it costs: the moving partitions are decided by nobody while the
// final copy travels, which takes as long as reading the keys changed
// since the first copy (milliseconds at the rates measured in
// BENCHMARKS.md); their checks wait for it, up to the router's deadline,
// after which the router answers by policy (the forward itself goes on
// for up to 2s, so such a check may still be counted at the destination:
// an error toward denying). A forward adds one shard to shard call to the
// checks of routers that have not switched yet, for at most Settle. A
// forward that fails (the destination died meanwhile) is answered
// not_decided, by policy.
//
// Failures. A Strict hand-off (the job's, a join) whose first copy fails
// stops before fencing anything: nothing switches. Once the final copy has
// begun, the switch follows. A destination marks as its own only what a
// final (or fenced) copy brought: where that copy failed, it decides none
// of the pair's partitions, and once routers switch it takes them over
// with a fence from the source like any partition gained without a
// hand-off (package shard's takeover), exactly while the source lives;
// the pair is reported as not handed over. A source whose fenced
// partitions see no switch (it failed) takes them back, with a fence, from
// every member and from the destinations it forwarded to (package shard's
// heal).
//
// One hand-off runs at a time in a cluster: Lock takes an etcd lock at
// <prefix>handoff/lock that the job's runs, drains and joins all hold while
// they move counters, so that each computes its pairs from members and a
// map that nobody else changes meanwhile.
//
// A shard that loses its lease is not a planned change: routers move its
// partitions at once. Each shard that gains one then pulls it (Pull) with a
// fence (PullRequest.fence), answering its checks not_decided (by policy)
// meanwhile: the source stops deciding the partitions before it exports
// them, so that the copy is exact with no switch to follow (package
// shard's takeover; a lost shard giving its counters back after it
// noticed, Options.Fence, does the same). A shard that died (kill
// -9) cannot be pulled from: its partitions count from zero at their next
// owners. A takeover takes no lock: nobody plans it, and the fence, not
// the lock, keeps its copy exact.
//
// Who calls it: the rebalance job (package rebalance) and the shard host
// (package shard: drain on Stop, warm join on Start and after a lost
// lease). It must never decide a check, never fence nor switch before the
// first copy of a Strict hand-off succeeded, and never switch before the
// final copy ended.
package handoff
