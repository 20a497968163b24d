// Package checker is the robustness suite's independent checker: given
// the rules and a history of checks recorded on the client side (each
// with its send and receive times and its answer), it proves, key by key,
// that the hits a cluster allowed by decision (not by failure policy)
// never exceed what the rule allows over any interval, or reports the
// interval that shows they did.
//
// Soundness from client-side times only: a check was decided at some
// instant between its send and its receive, so the checks certainly
// decided inside an interval [a, b] are those sent at or after a and
// received at or before b. A violation is reported only when those alone
// carry more hits than any correct limiter could allow in b − a: it never
// blames the cluster for an order it cannot prove. The bounds, per
// algorithm, with L the rule's limit, P its period and B its burst (each
// limit and burst raised by soft_percent and elastic_percent, the most
// they may add):
//
//   - token_bucket, gcra, leaky_bucket: B + L·(b − a)/P for every
//     interval (a bucket of B that refills, or a queue of B that drains,
//     at L per P; a leaky bucket's allowed checks are those admitted to
//     its queue);
//   - fixed_window, sliding_window: L in each window [k·P, (k+1)·P)
//     aligned on the Unix epoch (the sliding window's weighted count is
//     never below its current window's own);
//   - sliding_log: L in every interval shorter than P.
//
// Changed limits: a rule whose limit changed during the run carries Spans,
// each a limit and the times it may have been in force (a change starts
// its span when it is applied; the old one's ends once every router has
// the new one, as routers attach the rule to each check). An interval is
// held to the highest limit of the spans it meets, so a limit lowered
// binds the checks after every router had it.
//
// Resets, the allowance the design makes for a crash (DESIGN.md,
// "Bounded loss on crash"): a shard killed without a hand-off, or stalled
// or cut off from everyone past its lease, may have its partitions taken
// over from zero. Check takes such faults as Resets, each a span in which
// counters may restart once, and allows an interval that a reset's span
// meets one more burst (buckets) or one more limit (windows, the log) per
// reset: a counter started again from zero can add no more. The bound is
// checked like the others, never skipped; an interval that no reset meets
// gets none.
//
// Denied checks, policy answers and errors never count against a limit;
// Tally counts them, by outcome, inside fault windows the caller names.
//
// It shares no code with the limiter (it imports nothing of shardlimit),
// so that a bug there cannot hide itself here: the bounds are restated
// from the rules' documentation (README, "Rules file format").
package checker
