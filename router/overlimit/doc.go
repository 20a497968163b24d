// Package overlimit is the router's over-limit cache: counter keys known to
// be over their rule's limit, each with the shard's own answer, held until
// the key's retry time, so that a flooding user is denied by the router
// without a call to its shard, and stays denied while that shard is down.
//
// The router calls Lookup for each check before it calls any shard, and
// Add with each denial a shard answered that Exact says can be repeated;
// Forget when it refunds hits to a key; Versions.Assign when a rule set
// loads; and Sweep every second or so. Metrics read Len and Evicted.
//
// # Exact, not a guess
//
// A held answer is the shard's: denied, with its limit and remaining, and
// retry_after, reset_after (and a leaky bucket's delay) shortened by the
// time since the shard answered. Exact says which denials keep all of that
// true until their retry time: every algorithm's denial of 1 hit, and any
// denial of fixed_window; never a
// shadow or an elastic rule. An entry is used only for the same key, the
// same rule version and the same hits (a denial of 5 hits says nothing of
// 1 hit), and expires at its retry time. The caller reads now before it
// sends the check, so a held denial expires no later than the shard's
// (by up to the call's round trip earlier): the cache never denies a check
// that the shard would allow, except in the cases below.
//
// Where it can differ from the shard, until the entry's retry time:
//   - a refund gives the key hits back (another rule of a check denied it).
//     The router forgets the key when it refunds, so only refunds by other
//     routers, or racing with the denial, are missed;
//   - an operator resets the key on its shard (the shard API's Reset);
//   - the rule changes. That one is exact: an entry remembers its rule's
//     version (Versions), and a changed rule's entries are never used;
//   - the key's shard crashed and its partition restarted from zero on
//     another shard: the cache keeps denying until the retry time, which is
//     the intent (a user over its limit is not let through by a crash).
//
// Each router holds its own cache, so a user flooding N routers costs its
// shard about N decisions per retry period.
//
// # Layout
//
// Keys are the shard's own 128-bit counter keys (package key), compared in
// full, with the rule version and the hits: the cache confuses two users
// only where the shard's counters would. The cache is set-associative: up
// to 256 stripes, each with its own lock, hold buckets of Ways entries; a
// key lives only in its bucket, so every operation is O(Ways). A full
// bucket evicts its entry that expires soonest; Evicted counts those
// dropped before their time. An entry takes 72 bytes (64 for the entry,
// one cache line, and an 8-byte tag that a search reads first), allocated
// per stripe on its first Add: 7.2 MB for 100,000 entries. Lookup
// reads two atomic counts first and takes no lock while the key's stripe
// holds nothing, so a router with no user over a limit pays a few ns per
// check; it never allocates.
//
// Time is passed in, as ns on a clock that never goes back (the router
// passes monotonic time since it started). It must never read the clock,
// do I/O, call a shard, or hold a denial that Exact rejects.
package overlimit
