package limiter

// Refund gives back hits that the key whose state is s allowed moments ago
// under rule r, and returns the state after it, as a read (hits 0) at now
// would: allowed, with Remaining, ResetAfter and, for leaky_bucket, the
// Delay a request would have now. load is the caller's load, as for
// DecideLoad; it only sets the limit the answer reports, since a refund
// gives back exactly the hits the consume took whatever the limit now.
// The package doc (Refunds) says when a refund is exact, and what it may
// over-admit when other hits were counted between the consume and it.
//
// Per algorithm, with T = Period/Limit:
//   - token_bucket, gcra, leaky_bucket: the time kept in s moves back by
//     hits·T, in the limit the consume stored it with, but not below now: a
//     bucket that refilled meanwhile stays full, a queue that drained stays
//     empty.
//   - fixed_window: the count drops by hits if the state is the current
//     window and holds at least hits; otherwise the hits were counted in a
//     window that no longer counts, and nothing changes.
//   - sliding_window: the count of the window the state last counted in
//     drops by hits if that window is the current or the previous one
//     (where its count still weighs) and holds at least hits.
//
// Hits must be the hits of one allowed consume; hits <= 0 gives back
// nothing (callers reject them). In shadow mode only hits the rule would
// have allowed were counted: refund only a consume that was not
// ShadowDenied. The preconditions on now and r are Decide's.
func Refund(s *State, now int64, r *Rule, hits int64, load float64) Decision {
	switch {
	case r.Algorithm == SlidingLog:
		panic("limiter: sliding_log keeps its state in a Log: call RefundLog")
	case hits <= 0:
	case r.Algorithm.UsesBurst():
		refundTime(s, now, r, hits, load)
	case r.Algorithm == FixedWindow:
		if s.A >= now-now%r.Period && s.B >= hits {
			s.B -= hits
		}
	case r.Algorithm == SlidingWindow:
		start := now - now%r.Period
		if (s.A >= start || s.A == start-r.Period) && s.B&low32 >= hits {
			s.B -= hits // from the low 32 bits: the count of s.A's window
		}
	}
	return DecideLoad(s, now, r, 0, load) // the answer; panics for an invalid rule
}

// refundTime moves the time a bucket algorithm keeps in s back by hits·T,
// but not below now.
//
// T is counted in the limit that the time was stored with: that is the
// effective limit of the last consume, so the refund of that consume takes
// back exactly the n·T it added even if the load or the soft allowance
// changed the limit since. Only a state that never stored a limit (a fresh
// key) falls back to the limit now.
func refundTime(s *State, now int64, r *Rule, hits int64, load float64) {
	den := hi32(s.B)
	if den == 0 {
		den, _ = EffectiveLimit(r, load)
	}
	nowM := mixed{now, 0}
	t := loadTime(s, den)
	if !nowM.less(t) {
		return // full or empty already: nothing to give back
	}
	// hits·T > t − now when hits exceeds the whole hits the backlog holds;
	// comparing first keeps hits·T from overflowing.
	if hits > t.sub(nowM, den).floorDiv(r.Period, den) {
		t = nowM
	} else {
		t = t.sub(mulDiv(hits, r.Period, den), den)
	}
	storeTime(s, t, den)
}

// RefundLog is Refund for sliding_log rules, whose per-key state is a Log.
//
// It removes the newest hits entries in the window when they are one
// consume's worth, all at one time, as a consume of hits records them. With
// nothing recorded since, they are the refunded entries: exact. With others
// recorded since, at or after the refunded consume, the entries removed are
// no older than the refunded ones, so at every later time the log holds at
// least as many entries in the window as it would without the refunded
// consume had those others been recorded at its time. When the newest hits
// entries are not all at one time, or fewer are left, others were recorded
// since or the refunded entries have left the window; removing any entry
// could give back a hit that someone else took, so nothing is removed.
// Removing the oldest entries would never over-admit either, but it would
// not be exact even without interleaving: the refunded entries are the
// newest, and the oldest leave the window first.
func RefundLog(l *Log, now int64, r *Rule, hits int64, load float64) Decision {
	if r.Algorithm != SlidingLog {
		panic("limiter: RefundLog called for " + r.Algorithm.String() + ": call Refund")
	}
	l.expire(now - r.Period)
	if hits > 0 && hits <= int64(l.Len) && l.at(l.Len-int(hits)) == l.newest() {
		l.Len -= int(hits)
	}
	return DecideLog(l, now, r, 0, load)
}
