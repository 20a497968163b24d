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
// second admits exactly 3 hits in every second, and a caller that waits
// exactly RetryAfter is allowed.
//
// # State per algorithm
//
// Every algorithm but one keeps a 16-byte State{A, B}, whose zero value is
// a fresh key. The bucket algorithms keep one time in it as a mixed number:
// A is its whole ns, the low 32 bits of B its remainder, and the high 32
// bits of B the limit the remainder is counted in, so that a change of
// limit converts it (rounding up) instead of misreading it.
//
//   - token_bucket: the time is the theoretical arrival time, when the
//     bucket of Capacity tokens, refilled at Limit per Period, is full again.
//   - gcra: the time is the theoretical arrival time of the next hit (ITU-T
//     I.371 virtual scheduling, emission interval Period/Limit, tolerance
//     (Capacity−1)·Period/Limit); it decides exactly as token_bucket.
//   - leaky_bucket: the time is when the queue of at most Capacity hits,
//     drained at Limit per Period, is empty; minus now, it is the wait of a
//     new request.
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
// It must never depend on the network, etcd, gRPC or the wall clock.
package limiter
