// Package rebalance is the job that moves hot partitions between shards,
// and the home of the shard map (sub-package shardmap: the one owner
// function routers and the job share; mapstore: its etcd edge; planner: the
// pure planner).
//
// # The job
//
// Every instance serves the Rebalancer API and campaigns in an etcd
// election at <prefix>rebalance/election. The leader runs every Interval and
// on request (`shardlimit ctl rebalance apply`, forwarded by any router): it
// reads the live members, the shard map and every shard's load per
// partition over the last minute (Stats); if any of those cannot be read,
// the run does nothing and records why. Otherwise the planner picks the
// fewest moves that bring max/mean shard load under Threshold, the counters
// of the moved partitions are handed over, and the next map version is
// published by compare-and-swap on the map's revision, fenced by the
// leader's election key so that a deposed leader can never write. Each run
// is recorded at <prefix>rebalance/runs/. When the leader dies, its session
// lease (SessionTTL) expires and another instance leads.
//
// # Hand-off: copy, switch, copy again, drop
//
// A planned move of partition p from shard A to shard B must not reset
// anyone's quota. The leader:
//
//  1. copies: exports every counter key of p from A and imports it into B;
//  2. switches: publishes the map that pins p to B; every router follows
//     it within a second (routers watch the map key);
//  3. waits Settle (1.5 s by default) for the routers to switch;
//  4. copies again: exports p from A once more and imports it into B, which
//     brings over what A counted between step 1 and the routers' switch;
//  5. drops p's keys at A.
//
// An import merges by the more restrictive state (limiter.Merge: the later
// bucket time, the later window or the higher count, the union of a log),
// so copying twice never gives quota back and a key B already counted is
// never weakened. A user at their limit before the move is at their limit
// after it.
//
// Over-admission is bounded by what one key receives on both shards inside
// the switch window: hits counted at A after step 4 are lost (only routers
// that had not switched after Settle send them there), and for a key that
// both A (before the switch) and B (after it) counted during the window,
// the merge keeps the larger count rather than the sum. With routers
// switching in milliseconds and Settle at 1.5 s, the cluster test that
// keeps 40 users consuming through a move, 13 of them moved, measured no
// over-admission at all (rebalance_test.go).
//
// A shard that dies is not a planned move: its partitions go to the ring's
// choice among live shards and start from zero: a crash cannot hand
// anything over.
//
// It must never write the shard map without the election fence, and never
// publish before the first copy succeeded.
package rebalance
