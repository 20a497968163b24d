// Package load counts a shard's decisions per partition over a sliding
// minute, for the rebalance job, which compares partitions' loads to pick
// the hot ones to move.
//
// The shard's decision path calls Counter.Add once per decision, or, for a
// batch of decisions at one time, Counter.Batch once and Batch.Add per
// decision; the stats handler calls Snapshot when
// the rebalance job asks. Add is one atomic load and one atomic add: no
// lock, no allocation. Once per bucket (10 s), the first Add of the new
// bucket allocates it (8 bytes a partition) and swaps it into the slot of
// the bucket that just left the window, with a compare-and-swap, so no Add
// ever waits. Snapshot takes no lock either.
//
// # Granularity and error
//
// Time is cut into buckets of 10 s (Bucket). A Counter keeps 7 of them (the
// current one and the six before it). Snapshot(now) returns, per partition,
// the current partial bucket, the five whole buckets before it, and the
// oldest bucket weighted by the part of it still inside [now−60s, now]. The
// only error is that weighting: it assumes the oldest bucket's decisions
// were spread evenly over its 10 s, so the result differs from the exact
// count of the last minute by at most the count of one 10-s bucket (a sixth
// of a steady minute), and by nothing for a steady rate. Unlike a plain sum
// of whole buckets, it has no saw-tooth at bucket boundaries.
//
// # Memory
//
// 8 bytes × 7 buckets × (partitions + 1): 57 KiB for 1024 partitions,
// 3.5 MiB (3,670,072 bytes) for the maximum of 65536; a bucket that leaves
// the window is garbage (at most 512 KiB every 10 s).
//
// # Out-of-range partitions
//
// A partition outside [0, partitions) — a router and shard that disagree on
// the partition count during a map change, say — never panics and never
// grows the Counter: it is counted in one extra "other" column, reported by
// Other over the same sliding minute, so a nonzero value is visible in
// metrics.
//
// Time is always passed in (Unix nanoseconds). An Add whose slot already
// holds a newer bucket (one at least 60 s late) is dropped.
//
// It must never read the clock, take a lock, or allocate but once a bucket.
package load
