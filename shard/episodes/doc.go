// Package episodes is the shard's limited-user log: a bounded, in-memory
// record of when each key started and stopped being denied.
//
// The shard's store calls it from the decision path. It keeps one
// "limited" bit per key and calls Begin on a key's first denial (the bit
// goes up), Deny on each further denial while the bit is up, and End on
// the first allow after, or when the key expires (the bit goes down). The
// admin API calls List to answer "which users of service S were limited
// between from and to", and metrics read Len and Dropped.
//
// Deny is the per-decision call: it takes only the lock of one of 64
// stripes chosen by the key, looks the key up in that stripe's map and
// bumps a counter, allocating nothing, so no key waits on another stripe's
// keys. Begin and End run once per episode: they also take the log's own
// lock (to bound the log and to file closed episodes), and Begin copies the
// four strings into one allocation, so a kept episode never pins the
// caller's buffers.
//
// The log holds at most Capacity episodes, open and closed. A Begin that
// finds it full drops the oldest closed episode; when every held episode
// is still open or closing, it drops the new one instead. Either way
// Dropped counts it. A Begin within Merge of the same key's End reopens
// that episode rather than starting a new one, so a client that keeps
// pushing at its limit (denied, allowed once as a token refills, denied
// again) makes one episode, not one per refill. An ended episode waits in
// its stripe until Merge has passed (List already shows it ended); Sweep,
// which the store calls from its expiry loop, and later Begins and Ends in
// the same stripe file it into the log proper.
//
// Time is always passed in, as Unix nanoseconds. It must never read the
// clock, call back into the store, do I/O, or allocate in Deny.
package episodes
