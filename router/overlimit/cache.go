package overlimit

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/shardlimit/shard/key"
)

// Ways is the number of entries in a bucket: a key can only be held in the
// Ways slots of its bucket, and an insertion into a full bucket evicts the
// one of them that expires soonest.
const Ways = 8

// MinEntries is the smallest cache New accepts: one bucket.
const MinEntries = Ways

// maxStripes is the most stripes, each with its own lock.
const maxStripes = 256

// Denial is what a shard answered a denied check, with its waits as
// absolute times on the cache's clock, so that the answer at any later now
// is the shard's own with the waits shortened by the time passed (see
// Denial.At).
type Denial struct {
	// Limit and Remaining as the shard answered them.
	Limit, Remaining int64
	// RetryAt is when the same hits may be allowed again: the entry
	// expires then.
	RetryAt int64
	// ResetAt is when the key is back to a fresh state.
	ResetAt int64
	// DelayAt is when a leaky bucket's queue would have served the
	// request; the time of the denial for the other algorithms.
	DelayAt int64
}

// entry is one slot of a bucket; its tag says whether it is in use. It is
// a Denial packed into 64 bytes, one cache line: a limit (and so a
// remaining) is under 2^32 (limiter.MaxEffectiveLimit).
type entry struct {
	k                         key.Key
	version                   uint64
	hits                      int64
	limit, remaining          uint32
	retryAt, resetAt, delayAt int64
}

func (e *entry) denial() Denial {
	return Denial{Limit: int64(e.limit), Remaining: int64(e.remaining), RetryAt: e.retryAt, ResetAt: e.resetAt, DelayAt: e.delayAt}
}

// stripe is a run of buckets under one lock. tags[i] is slots[i]'s key's
// Lo with the low bit set (0: empty), so that a bucket's search reads one
// cache line of tags and only the entries whose tag matches. Both are
// allocated on the first Add, so an idle cache costs no memory.
type stripe struct {
	mu    sync.Mutex
	tags  []uint64
	slots []entry
	held  atomic.Int64 // occupied slots, read without the lock
}

// Cache holds denials of counter keys that are over their rule's limit,
// each until its retry time. It is safe for concurrent use. The nil *Cache
// is a disabled cache: it holds nothing and every Lookup misses.
type Cache struct {
	stripes []stripe
	shift   uint // a key's stripe is k.Hi >> shift
	buckets int  // buckets per stripe
	held    atomic.Int64
	evicted atomic.Uint64
}

// New returns a cache of at most entries entries: entries/Ways buckets of
// Ways slots, spread over up to 256 stripes. It panics when entries is
// under MinEntries, a caller's bug (options validate the bound).
func New(entries int) *Cache {
	if entries < MinEntries {
		panic("overlimit: a cache holds at least MinEntries entries")
	}
	buckets := entries / Ways
	n := 1 << (bits.Len(uint(min(buckets, maxStripes))) - 1) // a power of two, at most buckets
	return &Cache{
		stripes: make([]stripe, n),
		shift:   uint(64 - bits.TrailingZeros(uint(n))),
		buckets: buckets / n,
	}
}

// Cap returns the most entries the cache can hold: New's entries rounded
// down to whole buckets in every stripe.
func (c *Cache) Cap() int {
	if c == nil {
		return 0
	}
	return len(c.stripes) * c.buckets * Ways
}

// Len returns the entries held, expired ones not yet dropped included.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	return int(c.held.Load())
}

// Evicted returns how many entries were dropped before their retry time to
// make room for another.
func (c *Cache) Evicted() uint64 {
	if c == nil {
		return 0
	}
	return c.evicted.Load()
}

// stripe returns k's stripe. With one stripe the shift is 64, and the
// shifted key 0.
func (c *Cache) stripe(k key.Key) *stripe { return &c.stripes[k.Hi>>c.shift] }

// bucket returns the index in its stripe of k's first slot: the low 32
// bits of Hi scaled to the stripe's buckets (the high bits chose the
// stripe).
func (c *Cache) bucket(k key.Key) int {
	b := (uint64(uint32(k.Hi)) * uint64(c.buckets)) >> 32
	return int(b) * Ways
}

// tag is what the tags of a stripe hold for k.
func tag(k key.Key) uint64 { return k.Lo | 1 }

// own returns the slot of s that holds k, -1 when none does. The caller
// holds s's lock.
func (s *stripe) own(b int, k key.Key) int {
	if s.tags == nil {
		return -1
	}
	t := tag(k)
	for i, x := range s.tags[b : b+Ways : b+Ways] {
		if x == t && s.slots[b+i].k == k {
			return b + i
		}
	}
	return -1
}

// Lookup returns the denial held for key k under rule version version and
// hits, when it is in force at now: now is before its RetryAt. An entry of
// k that expired or belongs to another version is dropped; one for other
// hits is kept and misses. It takes no lock when k's stripe is empty, and
// never allocates.
func (c *Cache) Lookup(k key.Key, version uint64, hits, now int64) (Denial, bool) {
	if c == nil || c.held.Load() == 0 {
		return Denial{}, false
	}
	s := c.stripe(k)
	if s.held.Load() == 0 {
		return Denial{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.own(c.bucket(k), k)
	if i < 0 {
		return Denial{}, false
	}
	switch e := &s.slots[i]; {
	case e.version != version || now >= e.retryAt:
		c.drop(s, i)
	case e.hits == hits:
		return e.denial(), true
	}
	return Denial{}, false
}

// Add holds d, the denial of hits on key k under rule version version, in
// place of any entry k had, until d.RetryAt. Nothing is held when d is
// already over at now, hits is under 1, or the limit is not a shard's (not
// in 0..2^32−1, or remaining over it). In a full bucket, the entry that
// expires soonest makes room (a recent denial is kept over an older one
// even when the older waits longer: the user just denied is the one still
// calling).
func (c *Cache) Add(k key.Key, version uint64, hits int64, d Denial, now int64) {
	if c == nil || hits < 1 || d.RetryAt <= now || d.Limit < 0 || d.Limit > math.MaxUint32 || d.Remaining < 0 || d.Remaining > d.Limit {
		return
	}
	s := c.stripe(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		s.tags = make([]uint64, c.buckets*Ways)
		s.slots = make([]entry, c.buckets*Ways)
	}
	b := c.bucket(k)
	i := s.own(b, k)
	if i < 0 {
		i = s.room(b, now)
	}
	switch e := &s.slots[i]; {
	case s.tags[i] == 0:
		s.held.Add(1)
		c.held.Add(1)
	case e.k != k && e.retryAt > now:
		c.evicted.Add(1)
	}
	s.tags[i] = tag(k)
	s.slots[i] = entry{
		k: k, version: version, hits: hits, limit: uint32(d.Limit), remaining: uint32(d.Remaining),
		retryAt: d.RetryAt, resetAt: d.ResetAt, delayAt: d.DelayAt,
	}
}

// room returns the slot for a new key in the bucket at b at now: the first
// empty or expired one, else the one that expires soonest. The caller holds
// s's lock.
func (s *stripe) room(b int, now int64) int {
	soonest := b
	for i := b; i < b+Ways; i++ {
		if s.tags[i] == 0 || s.slots[i].retryAt <= now {
			return i
		}
		if s.slots[i].retryAt < s.slots[soonest].retryAt {
			soonest = i
		}
	}
	return soonest
}

// Forget drops the entry of key k, whatever its version and hits.
func (c *Cache) Forget(k key.Key) {
	if c == nil || c.held.Load() == 0 {
		return
	}
	s := c.stripe(k)
	if s.held.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.own(c.bucket(k), k); i >= 0 {
		c.drop(s, i)
	}
}

// Clear drops every entry.
func (c *Cache) Clear() {
	if c == nil {
		return
	}
	for i := range c.stripes {
		s := &c.stripes[i]
		s.mu.Lock()
		clear(s.tags)
		clear(s.slots)
		c.held.Add(-s.held.Swap(0))
		s.mu.Unlock()
	}
}

// Sweep drops the entries expired at now and returns how many. Lookups and
// Adds reuse expired slots anyway; Sweep keeps Len and the lock-free test
// for an empty stripe true, and is meant to run every second or so.
func (c *Cache) Sweep(now int64) int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.stripes {
		s := &c.stripes[i]
		if s.held.Load() == 0 {
			continue
		}
		s.mu.Lock()
		for j, x := range s.tags {
			if x != 0 && s.slots[j].retryAt <= now {
				c.drop(s, j)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// drop empties the occupied slot i of s, whose lock the caller holds.
func (c *Cache) drop(s *stripe, i int) {
	s.tags[i], s.slots[i] = 0, entry{}
	s.held.Add(-1)
	c.held.Add(-1)
}
