package shard

import (
	"sync"
	"sync/atomic"

	"github.com/shardlimit/shardlimit/shard/hotkeys"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/load"
)

const stripes = 256

const (
	flagLimited = 1 << iota // the key is denied: an episode is open
	flagUsed                // used again since the eviction clock last passed it
	flagReused              // used again, and the clock has not passed it twice since
)

// logRef is a sliding_log key and its entry, as the stripe's logOrder
// lists them: the eviction clock and the sweep pass over them without a
// map lookup each.
type logRef struct {
	k  key.Key
	le *logEntry
}

// logEntry is the state of one sliding_log key.
type logEntry struct {
	log   limiter.Log
	fresh uint32
	at    int32 // index in the stripe's logOrder
	flags uint8
}

type stripe struct {
	mu       sync.Mutex
	t        table
	logs     map[key.Key]*logEntry
	logOrder []logRef // the keys of logs, for the eviction clock and the sweep
	logSlots int64    // ring entries of logs, for the memory estimate
	hand     int      // where the next eviction scan of the table starts
	logHand  int      // and of logOrder
	_        [28]byte // 128 bytes: stripes' locks on separate cache lines
}

// StoreOptions bound a store.
type StoreOptions struct {
	// MaxBytes bounds the estimated bytes of every key of every algorithm
	// (see memory.go), as MaxBytes/256 per stripe; 0 (the default) is
	// unbounded. Past it, an addition evicts as MaxKeys says.
	MaxBytes int64
	// MaxKeys bounds the keys held, as MaxKeys/256 per stripe; 0 (the
	// default) is unbounded. Past it, a new key evicts an idle key not
	// used lately, else any idle key, and an over-limit key only when the
	// 512 keys at the stripe's eviction hand are all over their limit.
	MaxKeys int
	// Episodes receives the limited-user episodes; nil records none.
	Episodes EpisodeLog
	// Load counts decisions per partition; nil counts none.
	Load *load.Counter
	// Hot finds the hottest keys; nil tracks none.
	Hot *hotkeys.Tracker
}

// EpisodeLog is what the store tells the limited-user log: a key starts
// being denied, is denied again, or stops being denied (allowed again, or
// dropped).
type EpisodeLog interface {
	Begin(k key.Key, c *Check, now int64)
	Deny(k key.Key, now int64)
	End(k key.Key, now int64)
}

// Check is one check as the store sees it.
type Check struct {
	Service, Endpoint, User, Rule string
	Hits                          int64
	// Partition is the key's partition as the router computed it.
	Partition int
}

// Store holds the counters of one shard host.
type Store struct {
	opts           StoreOptions
	perStripe      int
	perStripeBytes int64
	epoch          int64 // Unix ns
	stripes        [stripes]stripe

	evictions   [evictionReasons]atomic.Uint64
	expirations atomic.Uint64
}

// NewStore returns an empty store whose clock starts at now (Unix ns).
func NewStore(opts StoreOptions, now int64) *Store {
	s := &Store{opts: opts, epoch: now}
	if opts.MaxKeys > 0 {
		s.perStripe = max(1, opts.MaxKeys/stripes) // never more than MaxKeys in all
	}
	s.perStripeBytes = opts.MaxBytes / stripes
	for i := range s.stripes {
		s.stripes[i].logs = make(map[key.Key]*logEntry)
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

// stored returns the key under which the store keeps k's state for
// algorithm a: Lo's low 3 bits are replaced by a, so a rule that changes
// algorithm starts afresh under a new key (the old one expires), and no
// stored key is ever zero.
func stored(k key.Key, a limiter.Algorithm) key.Key {
	return key.Key{Hi: k.Hi, Lo: k.Lo&^7 | uint64(a)}
}

// Decide applies c.Hits to key k under rule r at now (Unix ns), with the
// shard's load in [0, 1] for elastic rules. A read (hits 0) of an absent key
// stores nothing; a key back to a fresh state is dropped at once.
func (s *Store) Decide(k key.Key, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	if s.opts.Load != nil {
		s.opts.Load.Add(c.Partition, now, 1)
	}
	if s.opts.Hot != nil {
		s.opts.Hot.Observe(hotkeys.Key(k), c.Service, c.Rule, c.User, 1)
	}
	return s.decide(stored(k, r.Algorithm), c, now, r, load)
}

func (s *Store) decide(k key.Key, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	st := &s.stripes[k.Hi>>56]
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Algorithm == limiter.SlidingLog {
		return s.decideLog(st, k, c, now, r, load)
	}
	var state limiter.State
	var flags uint8
	i, ok := st.t.find(k)
	if ok {
		state.A, state.B = st.t.slots[i].state()
		flags = st.t.slots[i].flags()
	}
	d := limiter.DecideLoad(&state, now, r, c.Hits, load)
	flags = s.episode(k, c, flags, &d, now)
	var sl *slot
	switch {
	case d.ResetAfter == 0 && flags&flagLimited == 0:
		if ok {
			st.t.deleteAt(i) // equivalent to a fresh key
		}
		return d
	case ok:
		sl = &st.t.slots[i]
		flags = touched(flags)
	case c.Hits > 0:
		s.makeRoom(st, now, addition{key: true, counter: true})
		sl = st.t.insert(k)
	default:
		return d
	}
	sl.setState(state.A, state.B)
	sl.setMeta(s.seconds(now+d.ResetAfter), flags)
	return d
}

func (s *Store) decideLog(st *stripe, k key.Key, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	le := st.logs[k]
	if le == nil {
		if c.Hits == 0 {
			return freshLog(r, load)
		}
		le = s.newLog(st, k, now, c.Hits, r.LogSize())
	} else {
		s.fitLog(st, k, le, now, r, c.Hits)
		le.flags = touched(le.flags)
	}
	d := limiter.DecideLog(&le.log, now, r, c.Hits, load)
	le.flags = s.episode(k, c, le.flags, &d, now)
	le.fresh = s.seconds(now + d.ResetAfter)
	if d.ResetAfter == 0 && le.flags&flagLimited == 0 {
		st.removeLog(k, le)
	}
	return d
}

// freshLog is the answer for a sliding_log key the store does not hold: a
// fresh key's, without allocating its ring.
func freshLog(r *limiter.Rule, load float64) limiter.Decision {
	limit, _ := limiter.EffectiveLimit(r, load)
	return limiter.Decision{Allowed: true, Limit: limit, Remaining: limit, Shadow: r.Shadow}
}

// Refund gives back c.Hits that key k allowed moments ago under rule r, at
// now (Unix ns) and the shard's load, because another rule of the same
// check denied it (see limiter.Refund), and answers the state after the
// refund. An absent key has nothing to give back: the answer is a fresh
// key's, and nothing is stored.
//
// A refund is not traffic: it counts no load and no hot key, opens or ends
// no episode, and does not mark the key used for eviction. A key it leaves
// fresh is dropped, as Decide drops one, unless an episode is open on it.
func (s *Store) Refund(k key.Key, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	k = stored(k, r.Algorithm)
	st := &s.stripes[k.Hi>>56]
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Algorithm == limiter.SlidingLog {
		return s.refundLog(st, k, c, now, r, load)
	}
	var state limiter.State
	i, ok := st.t.find(k)
	if !ok {
		return limiter.DecideLoad(&state, now, r, 0, load)
	}
	sl := &st.t.slots[i]
	state.A, state.B = sl.state()
	d := limiter.Refund(&state, now, r, c.Hits, load)
	if flags := sl.flags(); d.ResetAfter != 0 || flags&flagLimited != 0 {
		sl.setState(state.A, state.B)
		sl.setMeta(s.seconds(now+d.ResetAfter), flags)
	} else {
		st.t.deleteAt(i) // equivalent to a fresh key
	}
	return d
}

func (s *Store) refundLog(st *stripe, k key.Key, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	le := st.logs[k]
	if le == nil {
		return freshLog(r, load)
	}
	d := limiter.RefundLog(&le.log, now, r, c.Hits, load)
	le.fresh = s.seconds(now + d.ResetAfter)
	if d.ResetAfter == 0 && le.flags&flagLimited == 0 {
		st.removeLog(k, le)
	}
	return d
}

// episode updates the limited flag and tells the episode log about it.
func (s *Store) episode(k key.Key, c *Check, flags uint8, d *limiter.Decision, now int64) uint8 {
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

func (s *Store) endEpisode(k key.Key, flags uint8, now int64) {
	if flags&flagLimited != 0 && s.opts.Episodes != nil {
		s.opts.Episodes.End(k, now)
	}
}

// Reset forgets key k under every algorithm; it reports whether any state
// was held.
func (s *Store) Reset(k key.Key, now int64) bool {
	st := &s.stripes[k.Hi>>56]
	st.mu.Lock()
	defer st.mu.Unlock()
	held := false
	for a := limiter.TokenBucket; a <= limiter.GCRA; a++ {
		sk := stored(k, a)
		if le := st.logs[sk]; le != nil {
			s.endEpisode(sk, le.flags, now)
		} else if i, ok := st.t.find(sk); ok {
			s.endEpisode(sk, st.t.slots[i].flags(), now)
		} else {
			continue
		}
		s.drop(st, sk)
		held = true
	}
	return held
}

// StoreStats are the store's counts.
type StoreStats struct {
	Keys, LogKeys, LogSlots int64
	// Evictions counts the keys evicted under the bounds; EvictionsBy by
	// reason, indexed as EvictionReasons.
	Evictions   uint64
	EvictionsBy [evictionReasons]uint64
	Expirations uint64
	MaxKeys     int
	// EstimatedBytes is the memory of the keys held (see memory.go), and
	// MaxBytes its bound (0: unbounded).
	EstimatedBytes, MaxBytes int64
}

// Stats counts the keys held.
func (s *Store) Stats() StoreStats {
	out := StoreStats{Expirations: s.expirations.Load(), MaxKeys: s.opts.MaxKeys, MaxBytes: s.opts.MaxBytes}
	for i := range s.evictions {
		out.EvictionsBy[i] = s.evictions[i].Load()
		out.Evictions += out.EvictionsBy[i]
	}
	for i := range s.stripes {
		st := &s.stripes[i]
		st.mu.Lock()
		out.Keys += int64(st.t.len())
		out.LogKeys += int64(len(st.logs))
		out.LogSlots += st.logSlots
		out.EstimatedBytes += st.bytes()
		st.mu.Unlock()
	}
	return out
}

// Len returns the number of keys held.
func (s *Store) Len() int {
	st := s.Stats()
	return int(st.Keys + st.LogKeys)
}
