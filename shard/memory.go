package shard

import (
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Memory accounting. A stripe's bytes are its table's slots (32 bytes each,
// allocated: a table doubles past 13/16 full and halves once evictions or
// expiry leave it sparse) and its arena of key bytes (allocated: deleted
// keys' bytes stay until they outweigh the live ones), its sliding_log keys (bytesPerLogKey each) and
// their rings (8 bytes an entry). Rings start at minRing entries and double
// as a key's hits in the window need them, up to the rule's LogSize, so
// that a key costs what it holds, not what its limit would allow.
// StoreOptions.MaxBytes bounds the sum, as MaxBytes/256 per stripe (see
// makeRoom); a shard passes StoreBytes of Options.MaxMemoryBytes, half of
// the process's bound.

const (
	// bytesPerLogKey estimates a sliding_log key's memory besides its ring
	// and its key's bytes: its map slot, the logEntry, its place in
	// logOrder and allocation overhead (BenchmarkBytesPerKey measures it).
	bytesPerLogKey = 152
	// minRing is the ring length of a new sliding_log key.
	minRing = 8
)

// bytes returns the stripe's estimated bytes.
func (st *stripe) bytes() int64 {
	return st.t.bytes() + int64(len(st.logs))*bytesPerLogKey + st.logKeyBytes + st.logSlots*8
}

// keys returns the number of keys the stripe holds.
func (st *stripe) keys() int { return st.t.len() + len(st.logs) }

// ringSize returns the ring length that holds need entries, doubling from
// cur (at least minRing), at most limit; cur itself when need is over
// limit, since those hits are denied whatever the ring's length.
func ringSize(cur, need, limit int64) int64 {
	if need > limit || need <= cur {
		return max(cur, min(minRing, limit))
	}
	n := max(cur, minRing)
	for n < need {
		n *= 2
	}
	return min(n, limit)
}

// newLog adds sliding_log key k (a stored key) with a ring for need
// entries (up to limit), making room for it first.
func (s *Store) newLog(st *stripe, k string, now int64, need, limit int64) *logEntry {
	size := ringSize(0, need, limit)
	s.makeRoom(st, now, addition{key: true, bytes: bytesPerLogKey + int64(len(k)) + size*8})
	le := &logEntry{log: limiter.Log{Times: make([]int64, size)}, at: int32(len(st.logOrder))}
	st.logs[k] = le
	st.logOrder = append(st.logOrder, logRef{k, le})
	st.logSlots += size
	st.logKeyBytes += int64(len(k))
	return le
}

// removeLog forgets the sliding_log key whose entry is le.
func (st *stripe) removeLog(le *logEntry) {
	k := st.logOrder[le.at].k
	last := len(st.logOrder) - 1
	if moved := st.logOrder[last]; moved.le != le {
		st.logOrder[le.at] = moved
		moved.le.at = le.at
	}
	st.logOrder[last] = logRef{}
	st.logOrder = st.logOrder[:last]
	if cap(st.logOrder) > 64 && last < cap(st.logOrder)/4 {
		st.logOrder = append([]logRef(nil), st.logOrder...) // give back a flood's slots
	}
	st.logSlots -= int64(len(le.log.Times))
	st.logKeyBytes -= int64(len(k))
	delete(st.logs, k)
}

// growLog gives le's ring room for need entries (up to limit), making room
// in the stripe first; le itself is never evicted for it.
func (s *Store) growLog(st *stripe, le *logEntry, now int64, need, limit int64) {
	cur := int64(len(le.log.Times))
	if n := ringSize(cur, need, limit); n > cur {
		s.makeRoom(st, now, addition{bytes: (n - cur) * 8, keep: le})
		st.resizeLog(le, n)
	}
}

// fitLog gives le's ring room before a decision of hits at now under r,
// when the entries still in the window plus hits need more than it holds
// and no more than r.LogSize(). A ring larger than the rule now needs (its
// limit went down) shrinks at the sweep (trimLog).
func (s *Store) fitLog(st *stripe, le *logEntry, now int64, r *limiter.Rule, hits int64) {
	cur := int64(len(le.log.Times))
	if hits <= 0 || int64(le.log.Len)+hits <= cur {
		return // the common case: room enough, without expiring or LogSize
	}
	if need := int64(le.log.Live(now, r)) + hits; need > cur {
		s.growLog(st, le, now, need, r.LogSize())
	}
}

// resizeLog moves le's entries into a ring of n, keeping the newest.
func (st *stripe) resizeLog(le *logEntry, n int64) {
	st.logSlots += n - int64(len(le.log.Times))
	le.log.Move(make([]int64, n))
}

// trimLog halves a ring while a quarter of it would hold its entries, so
// that a key that once held many keeps no more than four times what it
// holds now. The sweep calls it: the entries it counts may include some
// that left the window (the sweep knows no rule), so it errs on the large
// side.
func (st *stripe) trimLog(le *logEntry) {
	n := len(le.log.Times)
	for n > minRing && le.log.Len*4 <= n {
		n /= 2
	}
	if n < len(le.log.Times) {
		st.resizeLog(le, int64(n))
	}
}
