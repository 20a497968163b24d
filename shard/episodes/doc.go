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
// Deny is the per-decision call: it finds the key's record in one of 64
// stripes (chosen by the key) through an open-addressed table of atomic
// pointers, and bumps the record's atomic counters. It takes no lock and
// allocates nothing, so denials of different keys share no memory that is
// written. Begin and End run once per episode: they take their stripe's
// lock, then the log's own (to bound the log and file closed episodes),
// and Begin copies the four strings into one allocation, so a kept episode
// never pins the caller's buffers. The store calls Begin, Deny and End for
// one key in order (under its own per-key lock), as the flag implies.
//
// The log holds at most Capacity episodes, open and closed. A Begin that
// finds it full drops the oldest closed episode, else (every held episode
// still open or closing) the open one that began first, so that a flood
// of limited keys cannot hide the newest episodes from `ctl limited`;
// DroppedBy counts each drop by reason. Dropping an open episode takes no
// other stripe's lock: the record is marked gone under the log's lock,
// lookups skip it at once, and its stripe removes it at its next Begin,
// End or Sweep. A Begin within Merge of the same key's End reopens
// that episode rather than starting a new one, so a client that keeps
// pushing at its limit (denied, allowed once as a token refills, denied
// again) makes one episode, not one per refill. An ended episode waits in
// its stripe until Merge has passed (List already shows it ended); Sweep,
// which the store calls from its expiry loop, and later Begins and Ends in
// the same stripe file it into the log proper.
//
// Memory: about 210 bytes per open episode and 155 per closed one with
// 40 bytes of strings (measured), plus at most 24 bytes per open one for
// the order of Begins, so 1.5–2.4 MB at the default capacity of 10000.
//
// Time is always passed in, as Unix nanoseconds. It must never read the
// clock, call back into the store, do I/O, or lock or allocate in Deny.
package episodes
