// Package eviction is how a shard that the routers cannot reach, while
// etcd still sees it alive, stops owning partitions: the routers report
// it, the rebalance leader evicts it, and its partitions are taken over
// exactly by live shards, within the lease TTL instead of never.
//
// Without it, a shard cut off from the routers but not from etcd keeps its
// lease, so the owner function keeps its partitions on it, and every check
// of its users is answered by failure policy for as long as the cut lasts.
// The steps, each an etcd record:
//
//   - report: a router whose circuit to a shard has stayed open (the shard
//     failed its calls and answered no liveness check) with its connection
//     down for the router's --unreachable-after (a cut link: the
//     connection breaks and cannot be made again), or open for ten times
//     that with the connection up (a stuck process; a stalled one loses
//     its lease sooner), while it still reaches another shard (so that a
//     router cut off from everything, whose own network is at fault,
//     reports nothing) and etcd (the time counts from when it last reached
//     etcd again, so that a router split off with one shard, whose
//     connections to the others are still being made again at the heal,
//     does not evict one of them with its first write), writes unreachable/<shard>/<router> under its own
//     lease. It deletes
//     the report when the circuit closes or the shard leaves; a router that
//     dies takes its reports with its lease.
//   - evict: the rebalance leader reads the reports, the members and the
//     evictions in force, and Decide picks at most one shard to evict: a
//     serving member reported by a live router after the member registered
//     (a report about an earlier registration is out of date), with at
//     least one other serving member left, and no other eviction in force,
//     so that a confused router can take out one shard at a time, never
//     the cluster. Evict writes evictions/<shard> under a lease of Hold,
//     only if the member's record is the one judged, then revokes the
//     member's lease.
//   - take over: to everyone else the revoked lease is a lost lease. The
//     routers move the shard's partitions to the owner function's next
//     owners, which pull the counters from the evicted shard with a fence
//     (shard/takeover.go): exact when shards still reach it, and the fence
//     ends its decisions before its counters leave. When none reaches it,
//     its partitions count from zero (the documented allowance of a
//     crash), but only once it cannot be deciding: the evicted shard,
//     when it sees its lease lost, fences everything and acknowledges
//     (Ack, eviction-acks/<shard>), and a taker waits for that, or, for a
//     shard cut off from etcd too that never saw the revoke, for what its
//     lease had left (Record.LeaseLeft) and a margin, by when its lease
//     guard (shard/leaseguard.go) stopped it (OutwaitEvicted). So a
//     partition never has two deciders. The evicted shard gives the
//     counters back fenced, and joins again.
//   - hold: WaitCleared keeps the evicted shard's process from joining
//     again while its eviction record lasts, so that a cut that lasts does
//     not bring its partitions back to a shard the routers cannot reach
//     every few seconds. The record expires after Hold, and the shard
//     joins warm (a planned hand-off, exact); if the routers still cannot
//     reach it, they report it again. A process started after the one
//     evicted (a crashed shard restarting: routers report a dead shard
//     too, as its connection cannot be made) is not held.
//
// The records are small JSON documents, validated when read: a malformed
// one is ignored, never acted on.
package eviction
