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
	d.NextAfter = slidingNext(prev, cur, start, now, p, limit, d.Remaining)
}

// slidingNext is the NextAfter of a sliding window whose current window
// starts at start and holds cur, after prev in the previous one, with
// remaining left: the first time at which
// limit − cur − ceil(prev·(p − elapsed)/p) >= remaining+1, in this window
// (prev's weight falls), or else in the next (where cur becomes prev and
// the count starts from zero). The count never rises as time passes, so
// the first such time is the wait.
func slidingNext(prev, cur, start, now, p, limit, remaining int64) int64 {
	if remaining >= limit {
		return 0
	}
	// In this window: ceil(prev·(p − e)/p) <= m, i.e. p − e <= m·p/prev.
	if m := limit - cur - remaining - 1; m >= 0 && prev > 0 {
		return max(start+p-mulDivCap(m, p, prev, p)-now, 0)
	}
	// In the next: ceil(cur·(p − e)/p) <= limit − remaining − 1.
	if cur == 0 {
		return start + p - now
	}
	return start + 2*p - mulDivCap(limit-remaining-1, p, cur, p) - now
}

// weightedFits reports whether prev·left/p + cur <= room, exactly.
func weightedFits(prev, cur, left, p, room int64) bool {
	return cur <= room && mulCmp(prev, left, room-cur, p) <= 0
}
