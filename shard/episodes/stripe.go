package episodes

import (
	"sync"
	"sync/atomic"
)

// rec is an open or closing episode. Its immutable fields are set before
// it is published in a table; the rest are atomic, so Deny needs no lock.
type rec struct {
	key                           Key
	id                            uint64
	service, endpoint, user, rule string
	began                         int64
	ended, last                   atomic.Int64 // ended: 0 while open
	denied                        atomic.Uint64
	// gone: filed into the closed ring, or dropped; lookups skip it. Set
	// under the Log's mu.
	gone atomic.Bool
}

func (r *rec) episode() Episode {
	return Episode{
		ID: r.id, Service: r.service, Endpoint: r.endpoint, User: r.user, Rule: r.rule,
		Began: r.began, Ended: r.ended.Load(), LastDenied: r.last.Load(), Denied: r.denied.Load(),
	}
}

// deny counts one more denial at now.
func (r *rec) deny(now int64) {
	r.denied.Add(1)
	for last := r.last.Load(); now > last && !r.last.CompareAndSwap(last, now); last = r.last.Load() {
	}
}

// stripe holds the open and closing episodes of the keys that map to it.
//
// They sit in an open-addressed table of atomic pointers (linear probing,
// deleted slots marked with tomb), which Deny reads without a lock. Writers
// hold mu; when deleted and live slots fill half the table they publish a
// fresh copy, and a reader still on the old one finds the same records.
type stripe struct {
	mu  sync.Mutex
	tab atomic.Pointer[table]
	// live and tombs count the table's live and deleted slots.
	live, tombs int
	// closing lists ended episodes in order of End, from head on, until
	// Merge has passed.
	closing []closing
	head    int
	// dirty says the table may hold dropped records, for the next settle
	// to remove (purge).
	dirty atomic.Bool
	_     [64]byte // keep stripes' locks on separate cache lines
}

type table struct {
	slots []atomic.Pointer[rec]
	shift uint8 // 64 − log2(len(slots))
}

// tomb marks a deleted slot.
var tomb = new(rec)

func newTable(size int) *table {
	n, shift := 8, uint8(61)
	for n < size {
		n, shift = n*2, shift-1
	}
	return &table{slots: make([]atomic.Pointer[rec], n), shift: shift}
}

func (t *table) home(k Key) int { return int((k.Lo * 0x9e3779b97f4a7c15) >> t.shift) }

// find returns k's record, or nil; it skips a dropped one. It takes no
// lock.
func (st *stripe) find(k Key) *rec {
	t := st.tab.Load()
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		r := t.slots[i].Load()
		if r == nil {
			return nil
		}
		if r != tomb && r.key == k && !r.gone.Load() {
			return r
		}
	}
}

// purge removes the dropped records. st.mu is held.
func (st *stripe) purge() {
	t := st.tab.Load()
	for i := range t.slots {
		if r := t.slots[i].Load(); r != nil && r != tomb && r.gone.Load() {
			t.slots[i].Store(tomb)
			st.live--
			st.tombs++
		}
	}
}

// add publishes r, whose key is absent. st.mu is held.
func (st *stripe) add(r *rec) {
	t := st.tab.Load()
	if 2*(st.live+st.tombs+1) > len(t.slots) {
		t = st.rebuild(t)
	}
	mask := len(t.slots) - 1
	i := t.home(r.key)
	for {
		old := t.slots[i].Load()
		if old == nil || old == tomb {
			if old == tomb {
				st.tombs--
			}
			break
		}
		i = (i + 1) & mask
	}
	t.slots[i].Store(r)
	st.live++
}

// rebuild publishes a copy of t without its deleted slots, with room for
// as many live records again. st.mu is held.
func (st *stripe) rebuild(t *table) *table {
	nt := newTable(4 * (st.live + 1))
	mask := len(nt.slots) - 1
	for i := range t.slots {
		r := t.slots[i].Load()
		if r == nil || r == tomb {
			continue
		}
		j := nt.home(r.key)
		for nt.slots[j].Load() != nil {
			j = (j + 1) & mask
		}
		nt.slots[j].Store(r)
	}
	st.tab.Store(nt)
	st.tombs = 0
	return nt
}

// remove deletes r, which is present. st.mu is held.
func (st *stripe) remove(r *rec) {
	t := st.tab.Load()
	mask := len(t.slots) - 1
	i := t.home(r.key)
	for t.slots[i].Load() != r {
		i = (i + 1) & mask
	}
	t.slots[i].Store(tomb)
	st.live--
	st.tombs++
}

// each calls f for every record but the dropped ones. st.mu is held.
func (st *stripe) each(f func(*rec)) {
	t := st.tab.Load()
	for i := range t.slots {
		if r := t.slots[i].Load(); r != nil && r != tomb && !r.gone.Load() {
			f(r)
		}
	}
}

type closing struct {
	r     *rec
	ended int64
}

// ring is a FIFO of closed episodes that grows up to a capacity.
type ring struct {
	buf     []Episode
	head, n int
}

// push appends e; the caller keeps n below capacity.
func (r *ring) push(e Episode, capacity int) {
	if r.n == len(r.buf) {
		grown := make([]Episode, min(capacity, max(16, 2*len(r.buf))))
		for i := range r.n {
			grown[i] = *r.at(i)
		}
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
}

// pop drops the oldest episode.
func (r *ring) pop() {
	r.buf[r.head] = Episode{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// at returns the i-th oldest episode.
func (r *ring) at(i int) *Episode { return &r.buf[(r.head+i)%len(r.buf)] }
