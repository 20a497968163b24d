package shard

import (
	"github.com/shardlimit/shardlimit/shard/key"
)

// makeRoom keeps a stripe under its bound before a key is added: it drops
// keys that are already fresh again, then evicts.
func (s *Store) makeRoom(st *stripe, now int64) {
	if s.perStripe == 0 || st.t.len()+len(st.logs) < s.perStripe {
		return
	}
	if sec := s.seconds(now); sec != st.lastSweep {
		s.sweep(st, now)
		if st.t.len()+len(st.logs) < s.perStripe {
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
	// sample keys are looked at when an idle one is among them; past
	// maxScan the search stops, so that a stripe flooded with over-limit
	// keys costs a bounded scan, not the whole stripe. The scan resumes at
	// the stripe's hand, so successive evictions look at new keys.
	const sample, maxScan = 16, 512
	var unused, idle, limited candidate
	seen := 0
	enough := func() bool { return (seen >= sample && (unused.ok || idle.ok)) || seen >= maxScan }
	if n := len(st.t.slots); n > 0 {
		start := st.hand & (n - 1)
		for j := range n {
			st.hand = start + j + 1
			sl := &st.t.slots[(start+j)&(n-1)]
			if sl.empty() {
				continue
			}
			seen++
			k, flags, fresh := sl.key(), sl.flags(), sl.fresh()
			switch {
			case flags&flagLimited != 0:
				limited.offer(k, fresh)
			case flags&flagUsed != 0:
				idle.offer(k, fresh)
				sl.setMeta(fresh, flags&^flagUsed)
			default:
				unused.offer(k, fresh)
			}
			if enough() {
				break
			}
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
	k     key.Key
	fresh uint32
	ok    bool
}

func (c *candidate) offer(k key.Key, fresh uint32) {
	if !c.ok || fresh < c.fresh {
		*c = candidate{k: k, fresh: fresh, ok: true}
	}
}

func (s *Store) drop(st *stripe, k key.Key) {
	if le := st.logs[k]; le != nil {
		st.logSlots -= int64(len(le.log.Times))
		delete(st.logs, k)
		return
	}
	if i, ok := st.t.find(k); ok {
		st.t.deleteAt(i)
	}
}
