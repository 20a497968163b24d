package shard

import "hash/maphash"

// table is one stripe's counter keys: an open-addressing hash table with
// linear probing over 32-byte slots, grown past 13/16 full (by doubling, or
// as far as the stripe's memory share allows, so that the share is used
// whole rather than in powers of two) and with backward-shift deletion (no
// tombstones). Lookups return the slot, so a decision updates its state in
// place with one probe sequence.
//
// A counter is identified by its whole stored key (see storedKey), never by
// a hash: the key's bytes live in the table's arena, and a lookup compares
// them after a 32-bit tag. Slots and stripes are chosen by hash/maphash
// under a seed drawn at process start, mixed with a salt per table, so no
// caller can aim many keys at one slot: the placement hash that routers
// share (package key) plays no part here.
//
// Probe lengths are bounded: an insert that lands more than maxProbe slots
// from its key's home rehashes the table under a new salt (at most once per
// n/8 inserts, so that the cost stays amortized), which breaks up a cluster
// that chance built. A lookup is never refused: past the bound it is only
// slower, and only keys of the same seeded hash, which callers cannot
// compute, could make it so.
//
// Deleted keys leave their bytes in the arena until the dead bytes pass
// the live ones (and minDeadBytes), when the arena is compacted; the arena
// grows by a quarter; so a key costs its slot (32 / load) and one to two
// and a half times its bytes. Not safe for
// concurrent use: the stripe's mutex guards it.
type table struct {
	slots []slot
	n     int
	keys  []byte // the keys' bytes, slot.off to slot.off+slot.n
	dead  int    // bytes of keys no slot refers to
	salt  uint64 // mixed into the seeded hash for the slot's home
	seed  maphash.Seed
	// sinceRehash counts inserts since the last rehash, rehashes the
	// rehashes for a probe past maxProbe.
	sinceRehash, rehashes int
	// layouts counts the times resize moved the keys to new slots, so
	// that an eviction hand knows its pass over the slots was cut.
	layouts int
	// testHash, set by tests only, replaces the seeded hash to force
	// collisions; the caller passes its values as h.
	testHash func([]byte) uint64
}

// slot holds one key's hash tag, where its bytes are, and its state, in
// 32-bit words, so that it packs into 32 bytes. A slot is empty when n is
// 0: a stored key is never empty (it starts with its algorithm's byte).
type slot struct {
	tag            uint32 // the key's home hash under the table's salt
	off, n         uint32 // the key's bytes in the arena
	a0, a1, b0, b1 uint32 // limiter.State
	// meta holds the flags in its low 3 bits and, above them, the time the
	// key is fresh again in seconds since the store's epoch (29 bits: 17
	// years).
	meta uint32
}

const (
	minTableSlots = 8
	slotBytes     = 32 // unsafe.Sizeof(slot{}), checked by a test
	metaFlagBits  = 3
	maxFresh      = 1<<(32-metaFlagBits) - 1
	// maxProbe bounds how far from its home an insert places a key
	// before the table rehashes under a new salt: 32 KiB of slots, a
	// microsecond or two. With random homes at 13/16 full, the longest
	// run in a stripe's table at 10M keys is 150–250 (see
	// TestTableProbesStayShort).
	maxProbe = 1024
	// minDeadBytes is the least dead arena bytes that compaction frees.
	minDeadBytes = 4096
)

func newTable(seed maphash.Seed) table { return table{seed: seed} }

func (s *slot) empty() bool { return s.n == 0 }

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

// key returns slot i's key bytes, which alias the arena: valid until the
// table changes.
func (t *table) key(i int) []byte {
	s := &t.slots[i]
	return t.keys[s.off : s.off+s.n : s.off+s.n]
}

// tagOf mixes a key's seeded hash with the table's salt into the 32 bits
// that place it; the top 32 bits of a multiply spread every bit of h.
func (t *table) tagOf(h uint64) uint32 {
	return uint32(((h ^ t.salt) * 0x9e3779b97f4a7c15) >> 32)
}

// home is the first slot a key of the given tag probes: the tag scaled to
// the table's size, which takes a multiply instead of a mask so that a
// table may have any size.
func (t *table) home(tag uint32) int { return int(uint64(tag) * uint64(len(t.slots)) >> 32) }

// next is the slot probed after i.
func (t *table) next(i int) int {
	if i++; i == len(t.slots) {
		return 0
	}
	return i
}

// find returns the index of k's slot and true, or the index of the empty
// slot where k would go and false, and how many slots it probed past the
// first; h is k's seeded hash (Store.hash). The table must not be full.
func (t *table) find(h uint64, k []byte) (i int, ok bool, probes int) {
	if len(t.slots) == 0 {
		return -1, false, 0
	}
	tag := t.tagOf(h)
	for i = t.home(tag); ; i = t.next(i) {
		s := &t.slots[i]
		if s.empty() {
			return i, false, probes
		}
		if s.tag == tag && int(s.n) == len(k) && string(t.keys[s.off:s.off+s.n]) == string(k) {
			return i, true, probes
		}
		probes++
	}
}

// insert puts k, whose seeded hash is h, in a new slot and returns it; k
// must be absent. The slot's state and meta are zero.
func (t *table) insert(h uint64, k []byte) *slot {
	if t.full() {
		t.resize(t.grown(0))
	}
	i, _, probes := t.find(h, k)
	if probes > maxProbe && t.sinceRehash >= t.n/8 {
		t.rehashes++
		t.salt = maphash.Comparable(t.seed, [2]uint64{t.salt, uint64(t.rehashes)})
		t.resize(len(t.slots))
		i, _, _ = t.find(h, k)
	}
	t.sinceRehash++
	s := &t.slots[i]
	*s = slot{tag: t.tagOf(h), off: uint32(len(t.keys)), n: uint32(len(k))}
	if g := t.arenaGrowth(len(k)); g > 0 {
		t.keys = append(make([]byte, 0, int64(cap(t.keys))+g), t.keys...)
	}
	t.keys = append(t.keys, k...)
	t.n++
	return s
}

// arenaGrowth returns the bytes by which inserting a key of n bytes grows
// the arena: none while it has room, else a quarter of it and the key, so
// that growth stays amortized and a stripe's memory share is overrun by at
// most a quarter of its arena.
func (t *table) arenaGrowth(n int) int64 {
	if len(t.keys)+n <= cap(t.keys) {
		return 0
	}
	return int64(cap(t.keys)/4 + n)
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

// bytes returns the bytes of the table's slots and of its arena.
func (t *table) bytes() int64 { return int64(len(t.slots))*slotBytes + int64(cap(t.keys)) }

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

// resize moves the keys into a new array of n slots, more than it holds,
// placing each by its tag under the current salt (computed again from its
// bytes), and compacts the arena.
func (t *table) resize(n int) {
	old, oldKeys := t.slots, t.keys
	t.slots = make([]slot, n)
	t.keys = make([]byte, 0, len(oldKeys)-t.dead)
	t.dead = 0
	t.sinceRehash = 0
	t.layouts++
	for i := range old {
		s := old[i]
		if s.empty() {
			continue
		}
		k := oldKeys[s.off : s.off+s.n]
		s.tag = t.tagOf(t.hashOf(k))
		s.off = uint32(len(t.keys))
		t.keys = append(t.keys, k...)
		j := t.home(s.tag)
		for !t.slots[j].empty() {
			j = t.next(j)
		}
		t.slots[j] = s
	}
}

// hashOf is a key's seeded hash, as Store.hash computes it.
func (t *table) hashOf(k []byte) uint64 {
	if t.testHash != nil {
		return t.testHash(k)
	}
	return maphash.Bytes(t.seed, k)
}

// compact rewrites the arena with the live keys only, once the dead bytes
// outweigh them.
func (t *table) compact() {
	if t.dead < minDeadBytes || t.dead <= len(t.keys)-t.dead {
		return
	}
	keys := make([]byte, 0, len(t.keys)-t.dead)
	for i := range t.slots {
		if s := &t.slots[i]; !s.empty() {
			off := uint32(len(keys))
			keys = append(keys, t.keys[s.off:s.off+s.n]...)
			s.off = off
		}
	}
	t.keys, t.dead = keys, 0
}

// deleteAt empties slot i and shifts back the keys after it whose probe
// sequence passes through i, so that lookups never stop early. The key's
// bytes stay in the arena until it is compacted, which moves no slot: a
// caller may go on walking the slots, but not hold a key's bytes across.
func (t *table) deleteAt(i int) {
	t.dead += int(t.slots[i].n)
	for j := t.next(i); !t.slots[j].empty(); j = t.next(j) {
		h := t.home(t.slots[j].tag)
		// Move j to i if its home is not in the cyclic range (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot{}
	t.n--
	t.compact()
}

// len returns the number of keys.
func (t *table) len() int { return t.n }
