package hotkeys

import "slices"

// summary is one filtered space-saving summary (Metwally, Agrawal, El
// Abbadi 2005; the filter after Homem and Carvalho 2010) of at most m
// counters, for weighted updates.
//
// A monitored key's counter grows by n. Until the m counters are taken, a
// new key takes a fresh one. After that, a new key x adds n to its filter
// bucket f = filter[bucket(x)] while f + n stays within the smallest
// counter c_min; otherwise it takes over that counter, as f + n with error
// f, and the evicted key's bucket becomes at least c_min. This keeps:
//
//   - every counter's key has weight in [count − err, count];
//   - every key not monitored has weight at most its bucket;
//   - every bucket, and so every err, is at most c_min;
//   - the counters add up to at most the weight observed, N, so
//     c_min ≤ N/m.
//
// These are plain space-saving's bounds, but a key of the long tail only
// bumps one bucket instead of evicting a counter (which costs a heap sift
// and two table updates), and a key's bucket is usually well below c_min.
//
// Counters sit in a binary min-heap for the smallest, and an open-addressed
// table (linear probing, backward-shift deletion, at most half full) finds
// a key's counter. All of it is allocated once; observe never allocates.
type summary struct {
	entries []entry // len ≤ cap = m
	heap    []node  // len(heap) == len(entries); heap[0] is the smallest
	slots   []slot  // len a power of two ≥ 2m
	shift   uint8   // 64 − log2(len(slots))
	filter  []uint64
	fshift  uint8  // 64 − log2(len(filter))
	n       uint64 // weight observed
	sampled uint64 // of which from sampled calls (Tracker's business)
}

type entry struct {
	key                 Key
	err                 uint64
	service, rule, user string
	pos                 int32 // index of this entry's node in heap
}

type node struct {
	count uint64
	idx   int32 // index into entries
}

type slot struct {
	key Key
	idx int32 // index into entries + 1; 0 when empty
}

// filterPerCounter is the number of filter buckets per counter.
const filterPerCounter = 4

func newSummary(m int) summary {
	size, shift := pow2(2 * m)
	fsize, fshift := pow2(filterPerCounter * m)
	return summary{
		entries: make([]entry, 0, m),
		heap:    make([]node, 0, m),
		slots:   make([]slot, size),
		shift:   shift,
		filter:  make([]uint64, fsize),
		fshift:  fshift,
	}
}

// pow2 returns the least power of two ≥ max(n, 2), and 64 − its log2.
func pow2(n int) (int, uint8) {
	size, shift := 2, uint8(63)
	for size < n {
		size, shift = size*2, shift-1
	}
	return size, shift
}

// home is k's first slot: Fibonacci hashing of Lo plus Hi under another
// odd multiplier than bucket's, so that a Key whose Lo is 0 (the store's:
// one 64-bit hash in Hi) still spreads over the table with a slot
// independent of its bucket. From Lo alone, every such key had slot 0, and
// the table was one probe run that each call scanned (BENCHMARKS.md, issue
// 28, fourth round).
func (s *summary) home(k Key) int {
	return int(((k.Lo + k.Hi*0x94d049bb133111eb) * 0x9e3779b97f4a7c15) >> s.shift)
}

// bucket is k's filter bucket, from Hi, independent of its slot.
func (s *summary) bucket(k Key) int { return bucketOf(k, s.fshift) }

func bucketOf(k Key, shift uint8) int { return int((k.Hi * 0xbf58476d1ce4e5b9) >> shift) }

func (s *summary) observe(k Key, service, rule, user string, n uint64) {
	s.n += n
	mask := len(s.slots) - 1
	i := s.home(k)
	for s.slots[i].idx != 0 {
		if s.slots[i].key == k {
			e := &s.entries[s.slots[i].idx-1]
			s.heap[e.pos].count += n
			s.down(int(e.pos))
			return
		}
		i = (i + 1) & mask
	}
	if len(s.entries) < cap(s.entries) {
		// Nothing was evicted yet, so the filter is all zero.
		x := int32(len(s.entries))
		s.entries = append(s.entries, entry{key: k, service: service, rule: rule, user: user, pos: x})
		s.heap = append(s.heap, node{count: n, idx: x})
		s.slots[i] = slot{key: k, idx: x + 1}
		s.up(int(x))
		return
	}
	a := s.bucket(k)
	least := s.heap[0]
	if s.filter[a]+n <= least.count {
		s.filter[a] += n
		return
	}
	// Take over the smallest counter; the evicted key's weight, at most
	// that counter, now lives in its filter bucket.
	e := &s.entries[least.idx]
	s.remove(e.key)
	b := s.bucket(e.key)
	s.filter[b] = max(s.filter[b], least.count)
	*e = entry{key: k, err: s.filter[a], service: service, rule: rule, user: user, pos: 0}
	s.insert(k, least.idx)
	s.heap[0].count = s.filter[a] + n
	s.down(0)
}

// insert puts k, monitored by entries[x], in the table; k is absent.
func (s *summary) insert(k Key, x int32) {
	mask := len(s.slots) - 1
	i := s.home(k)
	for s.slots[i].idx != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = slot{key: k, idx: x + 1}
}

// remove takes k, which is present, out of the table, shifting back the
// keys of its probe run that would otherwise be cut off from their home.
func (s *summary) remove(k Key) {
	mask := len(s.slots) - 1
	i := s.home(k)
	for s.slots[i].key != k || s.slots[i].idx == 0 {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		if s.slots[j].idx == 0 {
			break
		}
		// The key at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if h := s.home(s.slots[j].key); (j-h)&mask < (j-i)&mask {
			continue
		}
		s.slots[i] = s.slots[j]
		i = j
	}
	s.slots[i] = slot{}
}

func (s *summary) up(p int) {
	h := s.heap
	x := h[p]
	for p > 0 {
		q := (p - 1) / 2
		if h[q].count <= x.count {
			break
		}
		h[p] = h[q]
		s.entries[h[p].idx].pos = int32(p)
		p = q
	}
	h[p] = x
	s.entries[x.idx].pos = int32(p)
}

func (s *summary) down(p int) {
	h := s.heap
	x := h[p]
	for {
		c := 2*p + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].count < h[c].count {
			c = r
		}
		if h[c].count >= x.count {
			break
		}
		h[p] = h[c]
		s.entries[h[p].idx].pos = int32(p)
		p = c
	}
	h[p] = x
	s.entries[x.idx].pos = int32(p)
}

// view is a copy of a summary, for Top to merge outside the stripe's lock.
type view struct {
	keys   []HotKey // Count and Error as in this summary
	filter []uint64
	fshift uint8
}

func (s *summary) view() view {
	v := view{keys: make([]HotKey, len(s.entries)), filter: slices.Clone(s.filter), fshift: s.fshift}
	for i, e := range s.entries {
		v.keys[i] = HotKey{Key: e.key, Service: e.service, Rule: e.rule, User: e.user, Count: s.heap[e.pos].count, Error: e.err}
	}
	return v
}

// bound is the most weight k can have had in the summary if the summary
// does not monitor it: its filter bucket (all zero until the summary is
// full).
func (v *view) bound(k Key) uint64 { return v.filter[bucketOf(k, v.fshift)] }

// reset empties the summary, keeping its memory, and lets go of strings.
func (s *summary) reset() {
	clear(s.entries)
	s.entries = s.entries[:0]
	s.heap = s.heap[:0]
	clear(s.slots)
	clear(s.filter)
	s.n, s.sampled = 0, 0
}
