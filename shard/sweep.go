package shard

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

// sweep drops a stripe's keys that are fresh again and gives back the
// memory its table and rings no longer need.
func (s *Store) sweep(st *stripe, now int64) {
	n := s.deleteIf(st, now, func(_ keyRef, fresh uint32) bool { return s.isFresh(fresh, now) })
	s.expirations.Add(uint64(n))
	st.t.shrink(1, 2)
	for _, r := range st.logOrder {
		st.trimLog(r.le)
	}
}

// deleteIf deletes every key of a stripe, of every algorithm, for which
// del(key, fresh) holds, ending its episode, and returns how many it
// deleted. The sweep and a hand-off's Drop both use it. The caller holds
// the stripe's lock.
func (s *Store) deleteIf(st *stripe, now int64, del func(k keyRef, fresh uint32) bool) int {
	n := 0
	for i := 0; i < len(st.t.slots); {
		sl := &st.t.slots[i]
		if !sl.empty() && del(keyRef{b: st.t.key(i)}, sl.fresh()) {
			s.endEpisode(sl.flags(), now, keyRef{b: st.t.key(i)})
			st.t.deleteAt(i) // shifts a later key into i: look at i again
			n++
			continue
		}
		i++
	}
	for i := len(st.logOrder) - 1; i >= 0; i-- { // removeLog moves the last key into i
		if r := st.logOrder[i]; del(keyRef{s: r.k}, r.le.fresh) {
			s.endEpisode(r.le.flags, now, keyRef{s: r.k})
			st.removeLog(r.le)
			n++
		}
	}
	return n
}

// isFresh reports whether a key whose fresh time is fresh (rounded up to
// seconds) is equivalent to a fresh key at now.
func (s *Store) isFresh(fresh uint32, now int64) bool {
	return now >= s.epoch+int64(fresh)*1e9
}
