package shard

import "github.com/shardlimit/shardlimit/shard/key"

// table is one stripe's counter keys: an open-addressing hash table with
// linear probing over 36-byte slots, grown past 13/16 full (by doubling, or
// as far as the stripe's memory share allows, so that the share is used
// whole rather than in powers of two) and with backward-shift deletion (no
// tombstones). A Go map of the same
// entries costs about 80 bytes per key at 10M keys; this table costs 36 /
// load, 45–89 bytes, 60 at 10M keys (see BENCHMARKS.md). Lookups return the
// slot, so a decision updates its state in place with one probe sequence.
//
// Keys are never zero (the algorithm is in Key.Lo's low bits, and is never
// zero), so an all-zero key marks an empty slot. Not safe for concurrent
// use: the stripe's mutex guards it.
type table struct {
	slots []slot
	n     int
}

// slot holds one key and its state in 32-bit words, so that it packs into
// 36 bytes instead of the 40 that 64-bit fields would align to.
type slot struct {
	hi0, hi1, lo0, lo1 uint32 // Key
	a0, a1, b0, b1     uint32 // limiter.State
	// meta holds the flags in its low 3 bits and, above them, the time the
	// key is fresh again in seconds since the store's epoch (29 bits: 17
	// years).
	meta uint32
}

const (
	minTableSlots = 8
	slotBytes     = 36 // unsafe.Sizeof(slot{}), checked by a test
	metaFlagBits  = 3
	maxFresh      = 1<<(32-metaFlagBits) - 1
)

func (s *slot) key() key.Key {
	return key.Key{Hi: uint64(s.hi1)<<32 | uint64(s.hi0), Lo: uint64(s.lo1)<<32 | uint64(s.lo0)}
}

func (s *slot) setKey(k key.Key) {
	s.hi0, s.hi1, s.lo0, s.lo1 = uint32(k.Hi), uint32(k.Hi>>32), uint32(k.Lo), uint32(k.Lo>>32)
}

func (s *slot) is(k key.Key) bool {
	return s.hi0 == uint32(k.Hi) && s.lo0 == uint32(k.Lo) && s.hi1 == uint32(k.Hi>>32) && s.lo1 == uint32(k.Lo>>32)
}

func (s *slot) empty() bool { return s.hi0|s.hi1|s.lo0|s.lo1 == 0 }

func (s *slot) state() (a, b int64) {
	return int64(uint64(s.a1)<<32 | uint64(s.a0)), int64(uint64(s.b1)<<32 | uint64(s.b0))
}

func (s *slot) setState(a, b int64) {
	s.a0, s.a1, s.b0, s.b1 = uint32(a), uint32(uint64(a)>>32), uint32(b), uint32(uint64(b)>>32)
}

func (s *slot) flags() uint8  { return uint8(s.meta & (1<<metaFlagBits - 1)) }
func (s *slot) fresh() uint32 { return s.meta >> metaFlagBits }
func (s *slot) setMeta(fresh uint32, flags uint8) {
	s.meta = min(fresh, maxFresh)<<metaFlagBits | uint32(flags)
}

// home is the first slot a key probes: Hi's low 32 bits scaled to the
// table's size (its top byte picks the stripe), which takes a multiply
// instead of a mask so that a table may have any size.
func (t *table) home(k key.Key) int { return int(uint64(uint32(k.Hi)) * uint64(len(t.slots)) >> 32) }

// next is the slot probed after i.
func (t *table) next(i int) int {
	if i++; i == len(t.slots) {
		return 0
	}
	return i
}

// find returns the index of k's slot and true, or the index of the empty
// slot where k would go and false. The table must not be full.
func (t *table) find(k key.Key) (int, bool) {
	if len(t.slots) == 0 {
		return -1, false
	}
	for i := t.home(k); ; i = t.next(i) {
		s := &t.slots[i]
		if s.is(k) {
			return i, true
		}
		if s.empty() {
			return i, false
		}
	}
}

// insert puts k in a new slot and returns it; k must be absent. The slot's
// state and meta are zero.
func (t *table) insert(k key.Key) *slot {
	if t.full() {
		t.resize(t.grown(0))
	}
	i, _ := t.find(k)
	s := &t.slots[i]
	s.setKey(k)
	t.n++
	return s
}

// full reports whether the next insert doubles the table.
func (t *table) full() bool { return (t.n+1)*16 > len(t.slots)*13 }

// grown returns the size to grow a full table to: double, or as many
// slots as limit allows (0: no limit), but by an eighth at least, so that
// growth stays amortized; the table's own size when it cannot.
func (t *table) grown(limit int) int {
	n := max(minTableSlots, 2*len(t.slots))
	if limit > 0 {
		n = min(n, limit)
	}
	if n < minTableSlots || n < len(t.slots)+len(t.slots)/8 {
		return len(t.slots)
	}
	return n
}

// bytes returns the bytes of the table's slots.
func (t *table) bytes() int64 { return int64(len(t.slots)) * slotBytes }

// shrink halves the table while its keys fit at most num/den of the
// half, and reports whether it did. Eviction shrinks a table down to
// 13/16 full, the sweep down to half full, so that a table emptied by
// evictions or expiry gives its memory back.
func (t *table) shrink(num, den int) bool {
	n := len(t.slots)
	for n > minTableSlots && t.n*den <= n/2*num {
		n /= 2
	}
	if n == len(t.slots) {
		return false
	}
	t.resize(n)
	return true
}

// resize moves the keys into a new array of n slots, more than it holds.
func (t *table) resize(n int) {
	old := t.slots
	t.slots = make([]slot, n)
	for i := range old {
		if old[i].empty() {
			continue
		}
		j := t.home(old[i].key())
		for !t.slots[j].empty() {
			j = t.next(j)
		}
		t.slots[j] = old[i]
	}
}

// deleteAt empties slot i and shifts back the keys after it whose probe
// sequence passes through i, so that lookups never stop early.
func (t *table) deleteAt(i int) {
	for j := t.next(i); !t.slots[j].empty(); j = t.next(j) {
		h := t.home(t.slots[j].key())
		// Move j to i if its home is not in the cyclic range (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot{}
	t.n--
}

// len returns the number of keys.
func (t *table) len() int { return t.n }
