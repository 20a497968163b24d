// Package rebalance is the job that moves hot partitions between shards.
// The shard map itself, and the one owner function routers, shards and the
// job share, are packages shard/shardmap and shard/mapstore; the planner is
// the pure package rebalance/planner.
//
// # The job
//
// Every instance serves the Rebalancer API and campaigns in an etcd
// election at <prefix>rebalance/election. The leader runs every Interval and
// on request (`shardlimit ctl rebalance apply`, forwarded by any router): it
// takes the cluster's hand-off lock (a shard draining or joining holds it
// while it moves counters; the run is then skipped and says so), reads the
// serving members, the shard map and every serving shard's load per
// partition over the last minute (Stats); if any of those cannot be read,
// the run does nothing and records why. Otherwise the planner picks the
// fewest moves that bring max/mean shard load under Threshold, the counters
// of the moved partitions are handed over, and the next map version is
// published by compare-and-swap on the map's revision, fenced by the
// leader's election key so that a deposed leader can never write. Each run
// is recorded at <prefix>rebalance/runs/ as it starts and as each phase
// (plan, copy, copy again, publish, settle, drop) starts and ends, with the
// keys each pair copied and any error, at most once per ProgressEvery
// (progress.go), so that the Admin API's RebalanceRunStream shows the run
// as it happens. Its moves are the planned ones until it publishes a map,
// then that map's (a pair kept with its old owner is not among them). When the leader dies, its session lease (SessionTTL)
// expires and another instance leads; it first marks the runs left
// running as failed, naming their phase.
//
// # Hand-off
//
// A planned move must not reset anyone's quota. The run hands counters
// over with package shard/handoff, the one protocol that draining and
// joining shards use too: copy (streamed in bounded chunks, journaling
// what changes meanwhile), copy again under a fence only what changed (the
// old owners forward checks to the new ones from then on), switch (here:
// publish the map that pins the partitions to their new owners, but for
// a pair whose final copy failed, whose partitions stay with their old
// owner, as the map in force had them (not pinned to that owner: a member
// lost mid-run may have moved them with the ring already, and the map
// must not move them back): no table moves a partition whose counters did
// not move; the run fails and says so), wait
// Settle (1.5 s by default) for every router to follow the map, drop at
// the old owners. Every check of a moving partition is decided in one
// place at every moment, so the move is exact (package handoff). The
// cluster test keeps 40 users consuming through a move (rebalance_test.go).
//
// A shard that dies is not a planned move: its partitions go to the ring's
// choice among serving shards and start from zero: a crash cannot hand
// anything over.
//
// With Options.Tracer set, each run is a span (a child of the Run call's
// span when asked over the API), and the calls to shards of a run or a
// plan are children of the run's or the Plan call's span; at debug, each plan's inputs and moves are logged
// (debuglog.go).
//
// It must never write the shard map without the election fence, never
// publish before the first copy succeeded, and never publish a move whose
// final copy failed.
package rebalance
