// Package hotkeys finds the hottest keys of a shard: the top K counter keys
// by decisions, each with an estimated count and its error bound.
//
// The shard's store calls Tracker.Observe on every decision, or, for a
// batch of decisions, Observe on a Batch, which holds one stripe for the
// whole batch instead of locking it per call; the admin API
// and the shard's stats call Top. Rotate, called by the shard on a timer
// (say once a minute), ages counts out: Top covers the observations since
// the last Rotate but one, so one to two periods.
//
// # Design
//
// A Tracker keeps, for the current period and the one before, Stripes
// filtered space-saving summaries of Counters counters each (see summary
// for the algorithm and its invariants). Observe takes the stripe its P
// used last, from a sync.Pool, whose per-P cache makes the choice
// core-affine without any shared state; locks it with TryLock, moving on to
// the next stripe if another writer or a reader holds it; and updates it.
// So two cores write two different summaries whose cache lines stay in
// their own caches, and the hottest key, which every core sees most, is
// never a lock that every core fights over (as it would be if stripes were
// chosen by key). Observe allocates nothing (sync.Pool's own bookkeeping
// aside, when a goroutine changes P between taking and returning a stripe).
//
// On one core of the 2-core hosts a call costs about 45 ns on a Zipf
// stream, from 35 ns (one flooding key) to 90 ns (all keys distinct), and
// two cores run at twice the rate of one (BenchmarkObserve): two
// uncontended atomic operations for the lock, the pool's per-P slot, a
// table probe, and either a short heap sift for a monitored key or one
// filter bucket for a key of the long tail, which evicts a counter only
// once its bucket passes the smallest counter. Against the ~1 µs of gRPC
// work per check on these hosts (a no-op gRPC server: 1.6–2.0M checks/s with 100
// checks a message) that is a few percent. Where it is not, Sample = R
// observes one call in R at random, weighted R, past ExactUpTo a period:
// about 20 ns with R = 8.
//
// # Accuracy
//
// Space-saving summaries are mergeable, and Top merges all of them: a key's
// Count adds its counter in every summary that monitors it and its filter
// bucket (an upper bound of its weight there) in every one that does not.
// With N the weight observed in the period Top covers (Total) and
// m = Counters, every reported key's true weight w satisfies
// Count − Error ≤ w ≤ Count, with Error ≤ N/m, and every key with w > N/m
// is reported (when Top is asked for enough keys). That is the bound of one
// summary of m counters, whatever the number of stripes: the summaries'
// counters together hold at most N, each error and each bucket is at most
// its summary's smallest counter, and that is at most its share of N over m. On Zipf streams the errors of the top keys are far smaller (the
// tests measure them: top-20 exact, within 1%, even at s = 0.8 where the
// 20th key is below N/m).
//
// # Exact below a volume, sampled above
//
// With Sample = R > 1, each period still observes every call until it has
// seen ExactUpTo (default 10⁶) of weight; only the calls after that are
// sampled, one in R at random, weighted R. Rotate starts the next period
// exact again. So at low volume (300 checks over 7 users, or anything up
// to ExactUpTo a period) every count is exact within Error, which is 0
// while the summaries hold every key; sampling, whose purpose is CPU at
// high volume, never shows at low volume. Counting the exact phase costs
// a read of a counter shared by the cores per call, and an atomic add to
// it per Batch (at Done, or at the call that reaches ExactUpTo, the
// batch's last observed exactly); after the switch Observe only reads a
// flag next to it.
//
// Sampled calls keep the bounds above for the sampled stream, and add a
// random error: a key of weight w in sampled calls is estimated by
// R·Binomial(w, 1/R), unbiased, with variance (R−1)·w. When the periods
// Top covers include sampled weight S, every HotKey it reports is marked
// Sampled with SamplingError = ⌈3·√((R−1)·min(Count, S))⌉, three standard
// deviations (about 99.7% for large counts): its true weight lies in
// [Count − Error − SamplingError, Count + SamplingError]. For w ≥
// 10⁵·(R−1) that is within 1% of w. A HotKey is Exact when Error is 0 and
// it is not Sampled; the shard's Stats, `ctl top` (which marks estimates
// with ~ and shows Error + SamplingError as ±) and the shard's hot-key
// metrics carry both.
//
// # Memory
//
// 176 bytes per counter (an 80-byte entry with three string headers, a
// 16-byte heap node, two 24-byte table slots, four 8-byte filter buckets),
// times Counters × Stripes × 2 periods: with the defaults (256 counters, 8
// stripes) 4096 counters, 704 KiB; Tracker.Bytes reports it. Observe keeps
// references to the strings passed in, not copies: they must not alias a
// buffer the caller reuses.
//
// It must never read the clock, allocate or wait for another writer in
// Observe (unless all stripes are busy), or do I/O.
package hotkeys
