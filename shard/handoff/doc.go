// Package handoff moves the counters of partitions from one shard to
// another: the one hand-off protocol that the rebalance job's planned moves,
// a draining shard and a joining shard all use, so that no membership
// change a shard or the job plans resets anyone's quota.
//
// # Protocol: copy, switch, copy again, drop
//
// Move takes the pairs (from, to, partitions) whose owner changes, which
// Pairs computes from the owners before and after the change (both from
// the one owner function, shardmap.InForce), and:
//
//  1. copies every pair: the destination pulls from the source, shard to
//     shard (the shard API's Pull); the source streams the partitions' keys
//     in chunks bounded in keys and bytes (ExportStream) and the
//     destination merges each chunk as it arrives, so any number of keys
//     moves and no one in between decodes them;
//  2. switches: the caller's step after which routers send the partitions
//     to their new owners (the job publishes a map; a draining shard
//     writes its member record as draining; a joining one as serving);
//  3. waits Settle for every router to follow etcd;
//  4. copies every pair again, which brings over what the sources counted
//     between the first copy and the routers' switch;
//  5. drops the partitions at the sources (when Drop is set).
//
// Options.OnStep is told as each step starts, and Options.OnCopied as each
// pair's copy ends, so that a caller (the rebalance job) records progress.
//
// An import merges by the more restrictive state (limiter.Merge), so a
// second copy never gives quota back, and a key the destination already
// counted is never weakened. Checks stay exact for users at their limit:
// they are denied on both sides throughout. For users consuming during the
// switch, over-admission is bounded by what one key receives inside the
// switch window: hits counted at a source after step 4 are lost (only
// routers that had not switched after Settle send them there), and for a
// key both sides counted during the window the merge keeps the larger
// count, not the sum.
//
// One hand-off runs at a time in a cluster: Lock takes an etcd lock at
// <prefix>handoff/lock that the job's runs, drains and joins all hold while
// they move counters, so that each computes its pairs from members and a
// map that nobody else changes meanwhile.
//
// A shard that loses its lease is not a planned change: routers move its
// partitions at once. Each shard that gains one then pulls it (Pull) with a
// fence (PullRequest.fence): the source stops deciding the partitions
// before it exports them, so that the copy is exact with no switch to
// follow (package shard's takeover; a lost shard giving its counters back
// after it noticed, Options.Fence, does the same). A shard that died (kill
// -9) cannot be pulled from: its partitions count from zero at their next
// owners. A takeover takes no lock: nobody plans it, and the fence, not
// the lock, keeps its copy exact.
//
// Who calls it: the rebalance job (package rebalance) and the shard host
// (package shard: drain on Stop, warm join on Start and after a lost
// lease). It must never decide a check, and never switch owners before the
// first copy of a Strict hand-off succeeded.
package handoff
