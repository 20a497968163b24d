// Package limiter holds the rate-limiting algorithms as pure functions of
// (state, now, rule, hits) → (new state, decision).
//
// Time is always passed in as nanoseconds; nothing here reads a clock, takes a
// lock, allocates or does I/O. The shard's store calls these functions under
// its own per-stripe lock, and tests drive them with explicit times.
//
// Arithmetic is exact: an emission interval of period/limit that is not a
// whole number of nanoseconds is carried as a mixed number (whole
// nanoseconds plus a remainder in units of 1/limit ns), so a limit of 3 per
// second admits exactly 3 hits in every second, a caller that waits
// exactly RetryAfter is allowed, and one told Remaining 0 that waits
// exactly NextAfter is allowed one hit.
//
// # State per algorithm
//
// Every algorithm but one keeps a 16-byte State{A, B}, whose zero value is
// a fresh key. The bucket algorithms keep one time in it as a mixed number:
// A is its whole ns, the low 32 bits of B its remainder, and the high 32
// bits of B the limit the remainder is counted in, so that a change of
// limit converts it instead of misreading it: the backlog past now keeps
// its hits, each one interval of the new limit long (rounded up), and is
// stored in the new limit at the first decision after the change. Read as
// time, a lowered limit would free part of the backlog at once.
//
//   - token_bucket: the time is the theoretical arrival time, when the
//     bucket of Capacity tokens, refilled at Limit per Period, is full again.
//   - gcra: the time is the theoretical arrival time of the next hit (ITU-T
//     I.371 virtual scheduling, emission interval Period/Limit, tolerance
//     (Capacity−1)·Period/Limit); it decides exactly as token_bucket.
//   - leaky_bucket: the time is when the queue of at most Capacity hits,
//     drained at Limit per Period, is empty; minus now, it is the wait of a
//     new request. A request that fits in the queue is admitted with that
//     wait as its Delay (capped by MaxDelay when set).
//   - fixed_window: A is the start of the window (a multiple of Period
//     since the Unix epoch) and B the hits allowed in it.
//   - sliding_window: A is the start of the current window, B the hits of
//     the previous window (high 32 bits) and of the current one (low 32).
//   - sliding_log keeps a Log instead: a caller-owned ring of the times of
//     the hits allowed in the last Period, one entry per hit, at most
//     Rule.LogSize() long; DecideLog decides it.
//
// # Limit kinds
//
// Soft, elastic and shadow limits wrap every algorithm: elastic growth and
// the soft allowance change the limit and capacity the algorithm runs with
// (EffectiveLimit, from a load the caller passes in), and shadow mode
// changes only the answer. The state is the same.
//
// # Refunds
//
// A check can match several rules, possibly on different shards. The
// router consumes on all of them at once and, when one denies, refunds the
// hits to those that allowed, so that a denied check consumes nothing.
// Refund and RefundLog give the hits back and answer the state after it,
// as a read (hits 0) would.
//
// A refund names the key and the hits, not the consume it undoes, so it
// undoes them where the key's last consume of that many hits put them:
// buckets move their time back by hits·T, but not below now; the window
// algorithms take the hits off the window the state last counted in, if
// that window still counts and holds them; a log drops its newest hits
// entries, if they are one consume's. Where the state shows that the hits
// are not there (drained, expired, fewer counted), nothing more comes
// back: a refund never creates capacity from hits it cannot find.
//
// That is exact, however late the refund, when nothing else was counted on
// the key in between: every later decision is the one the key would have
// got had the consume never happened. When others were counted in between,
// no rule that sees only the state can be both exact and never over-admit:
// "consume n, refund n" and "consume n, let it drain or leave the window,
// another request consumes n, refund n" can leave the same state and need
// different answers. Exactness wins; the refund then leaves the key at
// least as restrictive as if the hits counted in between had been counted
// at the time of the refunded consume. So what it may over-admit is bounded
// by the refund's delay: nothing when the refund comes at the instant of
// the consume, at most what that delay let drain or leave the window
// otherwise (for fixed_window, at most the refunded hits, and only when
// the consume and the refund fall on either side of a window boundary).
//
// Soft and elastic limits refund the same counter: the window algorithms
// count hits whatever the limit, and the buckets move their time back in
// the limit the consume stored it with, so a change of load in between
// changes nothing. In shadow mode only the hits the rule would have allowed
// were counted, and only those may be refunded.
//
// It must never depend on the network, etcd, gRPC or the wall clock.
package limiter
