package limiter

// slidingWindow weighs the previous fixed window by the part of it that
// the sliding window [now−Period, now] still covers:
//
//	count = prev·(Period − elapsed)/Period + cur
//
// where elapsed is the time since the current window started; n hits are
// allowed when count + n <= Limit, compared exactly as
// prev·(Period − elapsed) <= (Limit − cur − n)·Period. State A is the start
// of the current window, B holds prev in its high 32 bits and cur in its
// low 32 bits (Validate keeps both under 2^32); a zero state has counted
// nothing.
//
// The count never rises as time passes: inside a window prev's weight
// falls, and at the next window start it equals the cur it replaces. So
// RetryAfter is the first time the count is low enough, and waiting it out
// is enough.
func slidingWindow(d *Decision, s *State, now int64, r *Rule, hits int64) {
	p, limit := r.Period, r.Limit
	start := now - now%p
	prev, cur := hi32(s.B), s.B&low32
	switch {
	case s.A >= start:
		start = s.A // the same window, or a later one if the clock went back
	case s.A == start-p:
		prev, cur = cur, 0
	default:
		prev, cur = 0, 0
	}
	elapsed := max(now-start, 0)
	*d = Decision{Limit: limit}
	switch {
	case hits < 0 || hits > limit:
		d.RetryAfter = Never
	case hits == 0:
		d.Allowed = true
	case weightedFits(prev, cur, p-elapsed, p, limit-hits):
		d.Allowed = true
		cur += hits
		s.A, s.B = start, prev<<32|cur
	case cur <= limit-hits:
		// The hits fit later in this window, once prev's weight is low
		// enough: at the first elapsed e with
		// prev·(p − e) <= (limit − hits − cur)·p.
		q := mulDivCap(limit-hits-cur, p, prev, p)
		d.RetryAfter = start + p - q - now
	default:
		// cur itself is too many: in the next window cur becomes prev,
		// and the hits fit at the first elapsed e with
		// cur·(p − e) <= (limit − hits)·p.
		q := mulDivCap(limit-hits, p, cur, p)
		d.RetryAfter = start + 2*p - q - now
	}
	// Remaining: limit − cur − ceil(prev·(p − elapsed)/p), at least 0.
	d.Remaining = max(limit-cur-mulDivCeil(prev, p-elapsed, p), 0)
	switch {
	case cur > 0:
		d.ResetAfter = start + 2*p - now
	case prev > 0:
		d.ResetAfter = start + p - now
	}
}

// weightedFits reports whether prev·left/p + cur <= room, exactly.
func weightedFits(prev, cur, left, p, room int64) bool {
	return cur <= room && mulCmp(prev, left, room-cur, p) <= 0
}
