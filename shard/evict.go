package shard

// Eviction reasons: the class of the key an eviction took, in the order
// eviction takes them. They are the values of the evictions metric's
// reason label.
const (
	evictIdle      = iota // used once, or not used again for two passes of the eviction clock
	evictActive           // used again lately, not over its limit
	evictOverLimit        // over its limit: only when the sample held nothing else
	evictionReasons
)

// EvictionReasons names the eviction reasons, indexed as
// StoreStats.EvictionsBy.
var EvictionReasons = [evictionReasons]string{"idle", "active", "over_limit"}

// addition is what is about to be added to a stripe.
type addition struct {
	key     bool      // a new key, which counts toward MaxKeys
	counter bool      // a new counter key: a slot in the table
	bytes   int64     // bytes besides the table's slots (a key's bytes, a ring)
	keep    *logEntry // a key held that must stay (its ring grows); nil: none
}

// over reports whether a stripe with a would be over a bound. Under a
// memory bound, a counter key needs a table that is not full: fit grows it
// within the stripe's share first.
func (s *Store) over(st *stripe, a addition) bool {
	if a.key && s.perStripe > 0 && st.keys() >= s.perStripe {
		return true
	}
	if s.perStripeBytes == 0 {
		return false
	}
	return st.bytes()+a.bytes > s.perStripeBytes || (a.counter && st.t.full())
}

// fit grows a full table as far as the stripe's share allows (by an eighth
// at least), before a counter key is added under a memory bound.
func (s *Store) fit(st *stripe, a addition) {
	if a.counter && s.perStripeBytes > 0 && st.t.full() {
		room := (s.perStripeBytes - st.bytes() + int64(len(st.t.slots))*slotBytes) / slotBytes
		if n := st.t.grown(int(max(room, 1))); n > len(st.t.slots) {
			st.t.resize(n)
		}
	}
}

// makeRoom keeps a stripe under its bounds before a is added: it grows a
// full table within the share, then drops one key at a time, a key that is
// fresh again or else an evicted one, until a fits. Each step costs a
// bounded scan (see evict), never a pass over the stripe: the sweep
// passes over every key, once per sweep interval, off the decision path.
// If the stripe holds nothing else to drop, a is added anyway: a stripe's
// share of the bound must hold its largest key (see
// Options.MaxMemoryBytes).
func (s *Store) makeRoom(st *stripe, now int64, a addition) {
	for s.fit(st, a); s.over(st, a) && s.evict(st, now, !a.counter, a.keep); s.fit(st, a) {
	}
}

// touched returns the flags of a key that is used again (not its first
// use, which leaves it unmarked): used, and reused, so that it takes the
// eviction clock two passes without a use to fall back to a new key's
// class.
func touched(flags uint8) uint8 { return flags | flagUsed | flagReused }

// evict drops one key other than keep, and reports whether it found one.
// It samples keys from the stripe's hands (one over the table, one over
// the sliding_log keys) and takes the first class it finds a key of:
//
//  0. expired: a key fresh again, which the sweep would drop anyway (an
//     expiration, not an eviction: no user loses a count);
//  1. idle: a key used once, or not used again for two passes of the
//     eviction clock (CLOCK: passing a key clears its used flag, else its
//     reused flag; passClock says which passes clear), so that a flood of
//     new keys, each used once, evicts its own keys before any key in
//     steady use;
//  2. a key not used again since the clock last passed it;
//  3. a key used since;
//  4. only when the whole sample holds nothing but over-limit keys, an
//     over-limit key.
//
// Within classes 2 to 4, the key closest to fresh goes first. Classes 2 and 3
// count as "active" evictions. With logsFirst the sliding_log keys are
// sampled first, so that making room for a ring frees ring bytes rather
// than table slots; a counter key taken shrinks the table once its keys
// fit in half of it.
func (s *Store) evict(st *stripe, now int64, logsFirst bool, keep *logEntry) bool {
	// The scan stops at the first expired or idle key, as a CLOCK hand
	// does, so that the hand passes each key about once per pass over the
	// stripe's keys however many are evicted; without one, it stops once sample keys
	// include a used one, and past maxScan, so that a stripe flooded with
	// over-limit keys costs a bounded scan, not the whole stripe. The scan
	// resumes at the stripe's hands, so successive evictions look at new
	// keys.
	const sample, maxScan = 16, 512
	const expired, idle, lessUsed, used, overLimit = 0, 1, 2, 3, 4
	var best [5]candidate
	seen := 0
	enough := func() bool {
		return best[expired].ok || best[idle].ok || (seen >= sample && (best[lessUsed].ok || best[used].ok)) || seen >= maxScan
	}
	// offer considers a key (a table slot's index, or a log) and returns
	// its flags once the clock passed: a clearing pass (see passClock)
	// clears one used flag, any other pass leaves them.
	offer := func(k evictable, flags uint8, fresh uint32, clears bool) uint8 {
		if k.le != nil && k.le == keep {
			return flags
		}
		seen++
		st.offered++
		switch {
		case s.isFresh(fresh, now):
			best[expired].offer(k, fresh, flags)
		case flags&flagLimited != 0:
			best[overLimit].offer(k, fresh, flags)
		case flags&flagUsed != 0:
			best[used].offer(k, fresh, flags)
			if clears {
				return flags &^ flagUsed
			}
		case flags&flagReused != 0:
			best[lessUsed].offer(k, fresh, flags)
			if clears {
				return flags &^ flagReused
			}
		default:
			best[idle].offer(k, fresh, flags)
		}
		return flags
	}
	scanTable := func() {
		n := len(st.t.slots)
		if n == 0 {
			return
		}
		start := st.hand % n
		for j := range n {
			if enough() {
				return
			}
			i := (start + j) % n
			st.hand = start + j + 1
			if i == 0 {
				st.tableClock.wrap(st.offered, st.keys())
				st.tableLayout = st.t.layouts
			} else if st.tableLayout != st.t.layouts {
				// The keys moved since the pass began: the hand
				// may meet a key it passed, so the rest of the
				// pass clears nothing.
				st.tableClock.clears = false
			}
			if sl := &st.t.slots[i]; !sl.empty() {
				sl.setMeta(sl.fresh(), offer(evictable{slot: i}, sl.flags(), sl.fresh(), st.tableClock.clears))
			}
		}
	}
	scanLogs := func() {
		n := len(st.logOrder)
		for j := 0; j < n && !enough(); j++ {
			st.logHand = (st.logHand + 1) % n
			if st.logHand == 0 {
				st.logClock.wrap(st.offered, st.keys())
			}
			r := st.logOrder[st.logHand]
			r.le.flags = offer(evictable{le: r.le}, r.le.flags, r.le.fresh, st.logClock.clears)
		}
	}
	if logsFirst {
		scanLogs()
		scanTable()
	} else {
		scanTable()
		scanLogs()
	}
	for class, c := range best {
		if !c.ok {
			continue
		}
		reason := evictActive
		switch class {
		case expired:
			s.endEpisode(c.flags, now, st.ref(c.k))
		case idle:
			reason = evictIdle
		case overLimit:
			reason = evictOverLimit
			s.endEpisode(flagLimited, now, st.ref(c.k))
		}
		if st.drop(c.k) {
			st.t.shrink(13, 16)
		}
		if class == expired {
			s.expirations.Add(1)
		} else {
			s.evictions[reason].Add(1)
		}
		return true
	}
	return false
}

// passClock says which passes of one eviction hand clear the used flags
// of the keys it passes. A stripe's keys are in two places, the table and
// the sliding_log keys, each with its own hand, and a hand laps its place
// as often as evictions scan it: a table of ten counter keys beside a
// thousand logs would be lapped a hundred times as often as the logs, and
// its keys, used once a minute, would fall back to idle between two uses
// and be evicted before any idle log key. So a pass clears flags only when
// the stripe's two hands have passed at least half the stripe's keys
// since the last pass that cleared: each key then loses a flag at most
// about twice per pass over the whole stripe, wherever it is held. A
// stripe of one kind of key clears on every pass, as a plain CLOCK does.
// A table that grows, shrinks or rehashes moves its keys, so a hand's pass
// over its slots clears nothing from then until it starts a new one.
type passClock struct {
	clears bool // the current pass clears flags
	at     int  // the stripe's offered count when the last clearing pass began
}

// wrap starts a hand's new pass, given the keys its stripe's hands have
// offered so far and the keys the stripe holds.
func (c *passClock) wrap(offered, keys int) {
	c.clears = offered-c.at >= keys/2
	if c.clears {
		c.at = offered
	}
}

// evictable is a key that eviction may take: a sliding log's entry, or
// else the index of a table slot. Eviction takes it before the table
// changes.
type evictable struct {
	le   *logEntry
	slot int
}

// ref returns k's stored key.
func (st *stripe) ref(k evictable) keyRef {
	if k.le != nil {
		return keyRef{s: st.logOrder[k.le.at].k}
	}
	return keyRef{b: st.t.key(k.slot)}
}

// candidate is the best key of one eviction class seen so far.
type candidate struct {
	k     evictable
	fresh uint32
	flags uint8 // of an expired key, whose episode its drop ends
	ok    bool
}

func (c *candidate) offer(k evictable, fresh uint32, flags uint8) {
	if !c.ok || fresh < c.fresh {
		*c = candidate{k: k, fresh: fresh, flags: flags, ok: true}
	}
}

// drop forgets k and reports whether it was a counter key (a table slot).
func (st *stripe) drop(k evictable) (counter bool) {
	if k.le != nil {
		st.removeLog(k.le)
		return false
	}
	st.t.deleteAt(k.slot)
	return true
}
