package limiter

// fixedWindow counts hits in windows [k·Period, (k+1)·Period) aligned on
// the Unix epoch. State A is the start of the window the count belongs to,
// B the hits allowed in it; a zero state has counted nothing.
//
// n hits are allowed when count + n <= Limit; a denied request is allowed
// when the window ends, where the count starts again from zero.
func fixedWindow(d *Decision, s *State, now int64, r *Rule, hits int64) {
	start := now - now%r.Period
	count := int64(0)
	if s.A >= start {
		// The same window, or a later one if the clock went back or the
		// period changed: keep counting in it.
		// A negative count is no state this code writes (a corrupted
		// import): it counts as none, never as extra room.
		start, count = s.A, max(s.B, 0)
	}
	end := start + r.Period
	*d = Decision{Limit: r.Limit}
	switch {
	case hits < 0 || hits > r.Limit:
		d.RetryAfter = Never
	case hits == 0:
		d.Allowed = true
	case count+hits > r.Limit:
		d.RetryAfter = end - now
	default:
		d.Allowed = true
		count += hits
		s.A, s.B = start, count
	}
	d.Remaining = max(r.Limit-count, 0)
	if count > 0 {
		d.ResetAfter = end - now
		d.NextAfter = end - now // the count starts again from zero
	}
}
