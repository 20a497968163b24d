package shard

import (
	"hash/maphash"
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
	k  string // the stored key
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
	logs     map[string]*logEntry // by stored key
	logOrder []logRef             // the keys of logs, for the eviction clock and the sweep
	logSlots int64                // ring entries of logs, for the memory estimate
	// logKeyBytes are the bytes of the keys of logs.
	logKeyBytes int64
	hand        int // where the next eviction scan of the table starts
	logHand     int // and of logOrder
	// offered counts the keys either eviction hand has passed; the
	// clocks say which pass of each hand clears the used flags (see
	// passClock).
	offered              int
	tableClock, logClock passClock
	tableLayout          int      // the table's layouts when tableClock's pass began
	_                    [24]byte // 256 bytes: stripes' locks on separate cache lines
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
	// seed, for tests that compare two stores key by key, is the seed of
	// the stripes, slots and hot keys; zero (always outside tests): drawn
	// by NewStore.
	seed maphash.Seed
}

// EpisodeLog is what the store tells the limited-user log: a key starts
// being denied, is denied again, or stops being denied (allowed again, or
// dropped). The store names a key by its identity (Store.ident), a hash
// under the process's secret seeds.
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
	// seed and identSeed are drawn when the store is made: seed picks a
	// key's stripe and (salted per table) its slot and names it to the hot
	// keys (64 bits); identSeed with seed names it to the episode log (128
	// bits). No caller knows them.
	seed, identSeed maphash.Seed
	stripes         [stripes]stripe

	evictions   [evictionReasons]atomic.Uint64
	expirations atomic.Uint64
}

// NewStore returns an empty store whose clock starts at now (Unix ns).
func NewStore(opts StoreOptions, now int64) *Store {
	s := &Store{opts: opts, epoch: now, seed: opts.seed, identSeed: maphash.MakeSeed()}
	if s.seed == (maphash.Seed{}) {
		s.seed = maphash.MakeSeed()
	}
	if opts.MaxKeys > 0 {
		s.perStripe = max(1, opts.MaxKeys/stripes) // never more than MaxKeys in all
	}
	s.perStripeBytes = opts.MaxBytes / stripes
	for i := range s.stripes {
		s.stripes[i].logs = make(map[string]*logEntry)
		s.stripes[i].t = newTable(s.seed)
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

// stackKey is the room for a stored key on the stack; longer ones (users
// over ~200 bytes) are built on the heap.
const stackKey = 256

// storedKey appends the key under which the store keeps a counter of
// (service, rule, user) for algorithm a: a's byte, then the key's encoding
// (key.Append). The counter is this key, whole: two checks share a counter
// only if their service, rule, user and algorithm are equal, whatever
// their hashes; a rule that changes algorithm starts afresh under a new
// key (the old one expires).
func storedKey(b []byte, a limiter.Algorithm, service, rule, user string) []byte {
	return key.Append(append(b, byte(a)), service, rule, user)
}

// hash is a stored key's hash under the store's secret seed: its top byte
// picks the stripe, the table salts it into a slot.
func (s *Store) hash(k []byte) uint64 { return maphash.Bytes(s.seed, k) }

// stripe returns the stripe of a stored key's hash.
func (s *Store) stripe(h uint64) *stripe { return &s.stripes[h>>56] }

// ident names a stored key to the episode log: 128 bits under the
// process's secret seeds, so that no caller can pick a name that another
// user's episodes are recorded under.
func (s *Store) ident(k []byte) key.Key {
	return key.Key{Hi: maphash.Bytes(s.seed, k), Lo: maphash.Bytes(s.identSeed, k)}
}

// identString is ident of a key held in a string.
func (s *Store) identString(k string) key.Key {
	return key.Key{Hi: maphash.String(s.seed, k), Lo: maphash.String(s.identSeed, k)}
}

// decide decides c on stored key k, whose hash is h.
func (s *Store) decide(h uint64, k []byte, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	st := s.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Algorithm == limiter.SlidingLog {
		return s.decideLog(st, k, c, now, r, load)
	}
	var state limiter.State
	var flags uint8
	i, ok, _ := st.t.find(h, k)
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
		s.makeRoom(st, now, addition{key: true, counter: true, bytes: st.t.arenaGrowth(len(k))})
		sl = st.t.insert(h, k)
	default:
		return d
	}
	sl.setState(state.A, state.B)
	sl.setMeta(s.seconds(now+d.ResetAfter), flags)
	return d
}

func (s *Store) decideLog(st *stripe, k []byte, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	le := st.logs[string(k)]
	if le == nil {
		if c.Hits == 0 {
			return freshLog(r, load)
		}
		le = s.newLog(st, string(k), now, c.Hits, r.LogSize())
	} else {
		s.fitLog(st, le, now, r, c.Hits)
		le.flags = touched(le.flags)
	}
	d := limiter.DecideLog(&le.log, now, r, c.Hits, load)
	le.flags = s.episode(k, c, le.flags, &d, now)
	le.fresh = s.seconds(now + d.ResetAfter)
	if d.ResetAfter == 0 && le.flags&flagLimited == 0 {
		st.removeLog(le)
	}
	return d
}

// freshLog is the answer for a sliding_log key the store does not hold: a
// fresh key's, without allocating its ring.
func freshLog(r *limiter.Rule, load float64) limiter.Decision {
	limit, _ := limiter.EffectiveLimit(r, load)
	return limiter.Decision{Allowed: true, Limit: limit, Remaining: limit, Shadow: r.Shadow}
}

// Refund gives back c.Hits that c's counter allowed moments ago under rule
// r, at now (Unix ns) and the shard's load, because another rule of the
// same check denied it (see limiter.Refund), and answers the state after
// the refund. An absent key has nothing to give back: the answer is a
// fresh key's, and nothing is stored.
//
// A refund is not traffic: it counts no load and no hot key, opens or ends
// no episode, and does not mark the key used for eviction. A key it leaves
// fresh is dropped, as a decision drops one, unless an episode is open on it.
func (s *Store) Refund(c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	var buf [stackKey]byte
	k := storedKey(buf[:0], r.Algorithm, c.Service, c.Rule, c.User)
	return s.refund(s.hash(k), k, c, now, r, load)
}

func (s *Store) refund(h uint64, k []byte, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	st := s.stripe(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Algorithm == limiter.SlidingLog {
		return s.refundLog(st, k, c, now, r, load)
	}
	var state limiter.State
	i, ok, _ := st.t.find(h, k)
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

func (s *Store) refundLog(st *stripe, k []byte, c *Check, now int64, r *limiter.Rule, load float64) limiter.Decision {
	le := st.logs[string(k)]
	if le == nil {
		return freshLog(r, load)
	}
	d := limiter.RefundLog(&le.log, now, r, c.Hits, load)
	le.fresh = s.seconds(now + d.ResetAfter)
	if d.ResetAfter == 0 && le.flags&flagLimited == 0 {
		st.removeLog(le)
	}
	return d
}

// episode updates the limited flag of stored key k and tells the episode
// log about it.
func (s *Store) episode(k []byte, c *Check, flags uint8, d *limiter.Decision, now int64) uint8 {
	denied := !d.Allowed || d.ShadowDenied
	switch {
	case c.Hits == 0:
	case denied && flags&flagLimited == 0:
		flags |= flagLimited
		if s.opts.Episodes != nil {
			s.opts.Episodes.Begin(s.ident(k), c, now)
		}
	case denied:
		if s.opts.Episodes != nil {
			s.opts.Episodes.Deny(s.ident(k), now)
		}
	case flags&flagLimited != 0:
		flags &^= flagLimited
		if s.opts.Episodes != nil {
			s.opts.Episodes.End(s.ident(k), now)
		}
	}
	return flags
}

// keyRef is a stored key as a walk over a stripe finds it: a table slot's
// bytes (valid until the table changes) or a sliding log's key.
type keyRef struct {
	b []byte
	s string
}

// placement returns the key's placement hash (key.Hash), for its
// partition.
func (k keyRef) placement() uint64 {
	if k.b != nil {
		return key.HashEncoded(k.b[1:])
	}
	return key.HashEncodedString(k.s[1:])
}

// endEpisode ends the episode of key k, about to be dropped, if one is
// open.
func (s *Store) endEpisode(flags uint8, now int64, k keyRef) {
	if flags&flagLimited == 0 || s.opts.Episodes == nil {
		return
	}
	if k.b != nil {
		s.opts.Episodes.End(s.ident(k.b), now)
	} else {
		s.opts.Episodes.End(s.identString(k.s), now)
	}
}

// Reset forgets (service, rule, user) under every algorithm; it reports
// whether any state was held.
func (s *Store) Reset(service, rule, user string, now int64) bool {
	held := false
	var buf [stackKey]byte
	for a := limiter.TokenBucket; a <= limiter.GCRA; a++ {
		k := storedKey(buf[:0], a, service, rule, user)
		h := s.hash(k)
		st := s.stripe(h)
		st.mu.Lock()
		if le := st.logs[string(k)]; le != nil {
			s.endEpisode(le.flags, now, keyRef{b: k})
			st.removeLog(le)
			held = true
		} else if i, ok, _ := st.t.find(h, k); ok {
			s.endEpisode(st.t.slots[i].flags(), now, keyRef{b: k})
			st.t.deleteAt(i)
			held = true
		}
		st.mu.Unlock()
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
	// Rehashes counts the tables rehashed under a new salt because an
	// insert probed past maxProbe.
	Rehashes uint64
	MaxKeys  int
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
		out.Rehashes += uint64(st.t.rehashes)
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
