package shard

import (
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

const stripes = 256

// Key is the 128-bit hash of a counter key.
type Key struct{ Hi, Lo uint64 }

// loSeed is the seed of the second hash; any constant other than zero.
const loSeed = 0x9e3779b97f4a7c15

// MakeKey hashes (service, rule, user) into a Key without allocating.
func MakeKey(service, rule, user string) Key {
	var h xxhash.Digest
	h.Reset()
	writeKey(&h, service, rule, user)
	hi := h.Sum64()
	h.ResetWithSeed(loSeed)
	writeKey(&h, service, rule, user)
	return Key{Hi: hi, Lo: h.Sum64()}
}

var sep = []byte{0}

func writeKey(h *xxhash.Digest, service, rule, user string) {
	_, _ = h.WriteString(service)
	_, _ = h.Write(sep)
	_, _ = h.WriteString(rule)
	_, _ = h.Write(sep)
	_, _ = h.WriteString(user)
}

// Flags of an entry.
const (
	flagLimited = 1 << iota // the key is denied: an episode is open
	flagUsed                // used since the eviction clock last passed
)

// entry is the state of one counter key: 24 bytes, 40 with its map key.
type entry struct {
	state limiter.State
	// fresh is when the key is back to a fresh state: seconds since the
	// store's epoch, rounded up. Past it the key can be dropped.
	fresh uint32
	algo  limiter.Algorithm
	flags uint8
}

// logEntry is the state of one sliding_log key.
type logEntry struct {
	log   limiter.Log
	fresh uint32
	flags uint8
}

type stripe struct {
	mu        sync.Mutex
	m         map[Key]entry
	logs      map[Key]*logEntry
	logSlots  int64  // timestamps held by logs, for the memory estimate
	lastSweep uint32 // seconds since epoch of the last sweep
	_         [24]byte
}

// StoreOptions bound a store.
type StoreOptions struct {
	// MaxKeys bounds the counter keys held; 0 (the default) is unbounded.
	// Past it, new keys evict the least recently used idle keys first, and
	// an over-limit key only when a stripe holds nothing else.
	MaxKeys int
	// Episodes receives the limited-user episodes; nil records none.
	Episodes EpisodeLog
}

// EpisodeLog is what the store tells the limited-user log: a key starts
// being denied, is denied again, or stops being denied (allowed again, or
// dropped).
type EpisodeLog interface {
	Begin(k Key, c *Check, now int64)
	Deny(k Key, now int64)
	End(k Key, now int64)
}

// Check is one check as the store sees it.
type Check struct {
	Service, Endpoint, User, Rule string
	Hits                          int64
}

// Store holds the counters of one shard host.
type Store struct {
	opts      StoreOptions
	perStripe int
	epoch     int64 // Unix ns
	stripes   [stripes]stripe

	evictions   atomic.Uint64
	expirations atomic.Uint64
}

// NewStore returns an empty store whose clock starts at now (Unix ns).
func NewStore(opts StoreOptions, now int64) *Store {
	s := &Store{opts: opts, epoch: now}
	if opts.MaxKeys > 0 {
		s.perStripe = max(1, (opts.MaxKeys+stripes-1)/stripes)
	}
	for i := range s.stripes {
		s.stripes[i].m = make(map[Key]entry)
		s.stripes[i].logs = make(map[Key]*logEntry)
	}
	return s
}

// seconds converts Unix ns to the store's clock, rounding up.
func (s *Store) seconds(ns int64) uint32 {
	d := ns - s.epoch
	if d <= 0 {
		return 0
	}
	return uint32((d + 1e9 - 1) / 1e9)
}

// Decide applies c.Hits to key k under rule r at now (Unix ns), with the
// shard's load in [0, 1] for elastic rules. A key whose stored state belongs
// to another algorithm starts afresh. A read (hits 0) of an absent key
// stores nothing.
func (s *Store) Decide(k Key, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	st := &s.stripes[k.Hi>>56]
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Algorithm == limiter.SlidingLog {
		return s.decideLog(st, k, c, now, r, load)
	}
	e, ok := st.m[k]
	if ok && e.algo != r.Algorithm {
		s.endEpisode(k, e.flags, now)
		e = entry{}
	}
	if !ok && c.Hits > 0 {
		s.makeRoom(st, now)
	}
	e.algo = r.Algorithm
	d := limiter.DecideLoad(&e.state, now, r, c.Hits, load)
	e.flags = s.episode(k, c, e.flags, &d, now)
	e.fresh = s.seconds(now + d.ResetAfter)
	switch {
	case d.ResetAfter == 0 && e.flags&flagLimited == 0:
		if ok {
			delete(st.m, k) // equivalent to a fresh key
		}
	case ok || c.Hits > 0:
		e.flags |= flagUsed
		st.m[k] = e
	}
	return d
}

func (s *Store) decideLog(st *stripe, k Key, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	le := st.logs[k]
	if le == nil {
		if _, stale := st.m[k]; stale { // the rule changed algorithm
			s.endEpisode(k, st.m[k].flags, now)
			delete(st.m, k)
		}
		if c.Hits == 0 {
			limit, _ := limiter.EffectiveLimit(r, load)
			return limiter.Decision{Allowed: true, Limit: limit, Remaining: limit}
		}
		s.makeRoom(st, now)
		le = &logEntry{log: limiter.Log{Times: make([]int64, r.LogSize())}}
		st.logs[k] = le
		st.logSlots += int64(len(le.log.Times))
	} else if size := int(r.LogSize()); size != len(le.log.Times) {
		st.logSlots += int64(size - len(le.log.Times))
		le.log.Move(make([]int64, size))
	}
	d := limiter.DecideLog(&le.log, now, r, c.Hits, load)
	le.flags = s.episode(k, c, le.flags, &d, now) | flagUsed
	le.fresh = s.seconds(now + d.ResetAfter)
	if d.ResetAfter == 0 && le.flags&flagLimited == 0 {
		st.logSlots -= int64(len(le.log.Times))
		delete(st.logs, k)
	}
	return d
}

// episode updates the limited flag and tells the episode log about it.
func (s *Store) episode(k Key, c *Check, flags uint8, d *limiter.Decision, now int64) uint8 {
	denied := !d.Allowed || d.ShadowDenied
	switch {
	case c.Hits == 0:
	case denied && flags&flagLimited == 0:
		flags |= flagLimited
		if s.opts.Episodes != nil {
			s.opts.Episodes.Begin(k, c, now)
		}
	case denied:
		if s.opts.Episodes != nil {
			s.opts.Episodes.Deny(k, now)
		}
	case flags&flagLimited != 0:
		flags &^= flagLimited
		if s.opts.Episodes != nil {
			s.opts.Episodes.End(k, now)
		}
	}
	return flags
}

func (s *Store) endEpisode(k Key, flags uint8, now int64) {
	if flags&flagLimited != 0 && s.opts.Episodes != nil {
		s.opts.Episodes.End(k, now)
	}
}

// makeRoom keeps a stripe under its bound before a key is added: it drops
// keys that are already fresh again, then evicts.
func (s *Store) makeRoom(st *stripe, now int64) {
	if s.perStripe == 0 || len(st.m)+len(st.logs) < s.perStripe {
		return
	}
	if sec := s.seconds(now); sec != st.lastSweep {
		s.sweep(st, now)
		if len(st.m)+len(st.logs) < s.perStripe {
			return
		}
	}
	s.evict(st, now)
}

// evict drops one key. It samples keys (map iteration starts at a random
// place) and takes, in this order: an idle key not used since the eviction
// clock last passed it (CLOCK: passing clears the used flag), else any idle
// key, else — only when the whole stripe holds nothing but over-limit keys —
// an over-limit key. Within a class, the key closest to fresh goes first.
func (s *Store) evict(st *stripe, now int64) {
	const sample = 16
	var unused, idle, limited candidate
	seen := 0
	enough := func() bool { return seen >= sample && (unused.ok || idle.ok) }
	for k, e := range st.m {
		seen++
		switch {
		case e.flags&flagLimited != 0:
			limited.offer(k, e.fresh)
		case e.flags&flagUsed != 0:
			idle.offer(k, e.fresh)
			e.flags &^= flagUsed
			st.m[k] = e
		default:
			unused.offer(k, e.fresh)
		}
		if enough() {
			break
		}
	}
	if !enough() {
		for k, le := range st.logs {
			seen++
			switch {
			case le.flags&flagLimited != 0:
				limited.offer(k, le.fresh)
			case le.flags&flagUsed != 0:
				idle.offer(k, le.fresh)
				le.flags &^= flagUsed
			default:
				unused.offer(k, le.fresh)
			}
			if enough() {
				break
			}
		}
	}
	victim := unused
	if !victim.ok {
		victim = idle
	}
	if !victim.ok {
		victim = limited
		s.endEpisode(victim.k, flagLimited, now)
	}
	if !victim.ok {
		return
	}
	s.drop(st, victim.k)
	s.evictions.Add(1)
}

// candidate is the best key of one eviction class seen so far.
type candidate struct {
	k     Key
	fresh uint32
	ok    bool
}

func (c *candidate) offer(k Key, fresh uint32) {
	if !c.ok || fresh < c.fresh {
		*c = candidate{k: k, fresh: fresh, ok: true}
	}
}

func (s *Store) drop(st *stripe, k Key) {
	if le := st.logs[k]; le != nil {
		st.logSlots -= int64(len(le.log.Times))
		delete(st.logs, k)
		return
	}
	delete(st.m, k)
}

// Sweep drops every key of the stripes [from, to) that is fresh again at now,
// ending its episode. The server sweeps all stripes once per sweep interval.
func (s *Store) Sweep(from, to int, now int64) {
	for i := from; i < to && i < stripes; i++ {
		st := &s.stripes[i]
		st.mu.Lock()
		s.sweep(st, now)
		st.mu.Unlock()
	}
}

func (s *Store) sweep(st *stripe, now int64) {
	st.lastSweep = s.seconds(now)
	n := 0
	for k, e := range st.m {
		if s.isFresh(e.fresh, now) {
			s.endEpisode(k, e.flags, now)
			delete(st.m, k)
			n++
		}
	}
	for k, le := range st.logs {
		if s.isFresh(le.fresh, now) {
			s.endEpisode(k, le.flags, now)
			st.logSlots -= int64(len(le.log.Times))
			delete(st.logs, k)
			n++
		}
	}
	s.expirations.Add(uint64(n))
}

// isFresh reports whether a key whose fresh time is fresh (rounded up to
// seconds) is equivalent to a fresh key at now.
func (s *Store) isFresh(fresh uint32, now int64) bool {
	return now >= s.epoch+int64(fresh)*1e9
}

// Reset forgets key k; it reports whether the key was held.
func (s *Store) Reset(k Key, now int64) bool {
	st := &s.stripes[k.Hi>>56]
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.m[k]
	le, okLog := st.logs[k]
	switch {
	case ok:
		s.endEpisode(k, e.flags, now)
	case okLog:
		s.endEpisode(k, le.flags, now)
	default:
		return false
	}
	s.drop(st, k)
	return true
}

// StoreStats are the store's counts.
type StoreStats struct {
	Keys, LogKeys, LogSlots int64
	Evictions, Expirations  uint64
	MaxKeys                 int
	EstimatedBytes          int64
}

// Bytes per key used in the memory estimate: a Go map slot of 16-byte key
// and 24-byte entry at the map's typical load, and a sliding_log key's
// pointer slot, logEntry and ring header.
const (
	bytesPerKey    = 56
	bytesPerLogKey = 32 + 64
)

// Stats counts the keys held.
func (s *Store) Stats() StoreStats {
	out := StoreStats{Evictions: s.evictions.Load(), Expirations: s.expirations.Load(), MaxKeys: s.opts.MaxKeys}
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		out.Keys += int64(len(st.m))
		out.LogKeys += int64(len(st.logs))
		out.LogSlots += st.logSlots
		st.mu.Unlock()
	}
	out.EstimatedBytes = out.Keys*bytesPerKey + out.LogKeys*bytesPerLogKey + out.LogSlots*8
	return out
}

// Len returns the number of keys held.
func (s *Store) Len() int {
	st := s.Stats()
	return int(st.Keys + st.LogKeys)
}
