// Package handoff runs the hand-off protocol between shards: Move drives
// the steps of one hand-off over every (source, destination) pair, and
// Pull is the destination's side of a copy. The rebalance job's planned
// moves, a draining shard and a joining shard all use it, so that no
// membership change a shard or the job plans resets anyone's quota.
//
// The protocol's states, events and steps, in order, are named once, in
// package partition's documentation (copy, copy again under a fence with
// forwarding, switch, settle, drop): Move performs the phases that
// partition.HandOff, which holds their order and decisions, returns, and
// each shard steps its partitions through partition.Step as the requests
// of Move reach it. This package says only how Move carries the steps out.
//
// Move takes the pairs (from, to, partitions) whose owner changes, which
// Pairs computes from the owners before and after the change (both from
// the one owner function, shardmap.InForce). Each copy is a Pull request
// to the destination, which streams the source's ExportStream, merging
// each chunk as it arrives, in chunks bounded in keys and bytes, so any
// number of keys moves and no one in between decodes them. The first copy
// asks the source for a journal (PullRequest.journal), the final copy for
// a fence that forwards to the destination and for only what the journal
// recorded (PullRequest.final; the whole partitions if the pair's first
// copy failed). Both copies of a pair name the hand-off (handoff_id), so
// that the final copy reads only the journal its own first copy started.
// The switch is the caller's function; Settle is how long Move waits
// after it; Drop has the sources forget the partitions. With
// SkipEmptySettle, a hand-off that has nothing to hand over (both copies
// streamed no key: a join at a cold start) drops at once after the switch:
// a router that has not switched yet is answered by policy for those
// partitions, instead of forwarded, until it does.
//
// Options.OnStep is told as each step starts, and Options.OnCopied as each
// pair's copy ends, so that a caller (the rebalance job) records progress.
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
// not_decided, by policy. An import merges by the more restrictive state
// (limiter.Merge), so no copy ever gives quota back.
//
// Failures. A Strict hand-off (the job's, a join) whose first copy fails
// stops before fencing anything: nothing switches. Once the final copy has
// begun, the switch follows (the rebalance job's leaves a pair whose
// final copy failed with its source: KeepSources gives the owners it
// publishes). A destination decides only what a final (or
// fenced) copy brought: where that copy failed, it decides none of the
// pair's partitions, and once a switch gives them to it (a join's or a
// drain's; the job's keeps them with the source) it takes them over with a
// fence from the source like any partition gained without a hand-off
// (package shard's takeover), exactly while the source lives; the pair is
// reported as not handed over. A source whose fenced partitions see no
// switch (it failed) takes them back, with a fence, from every member and
// from the destinations it forwarded to (package shard's heal); so does
// one whose switch kept them with it (the rebalance job's, for a pair
// whose final copy failed), at heal's next look once it sees that map.
//
// One hand-off runs at a time in a cluster: Lock takes an etcd lock at
// <prefix>handoff/lock that the job's runs, drains and joins all hold while
// they move counters, so that each computes its pairs from members and a
// map that nobody else changes meanwhile. A takeover takes no lock: nobody
// plans it, and the fence, not the lock, keeps its copy exact. Options.Fence
// makes every copy a fenced one with no switch to follow: a shard giving
// back the counters of the partitions it lost with its lease.
//
// Who calls it: the rebalance job (package rebalance) and the shard host
// (package shard: drain on Stop, warm join on Start and after a lost
// lease). It must never decide a check, never fence nor switch before the
// first copy of a Strict hand-off succeeded, and never switch before the
// final copy ended.
package handoff
