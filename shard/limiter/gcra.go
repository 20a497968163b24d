package limiter

// gcra is the generic cell rate algorithm of ITU-T I.371 in its virtual
// scheduling form, with emission interval T = Period/Limit and tolerance
// τ = (Capacity−1)·T, so that a fresh key admits Capacity hits back to
// back (the classic τ with Burst 0 would be 0: one hit per T). The state
// is the theoretical arrival time (TAT) of the next hit, a mixed number
// kept by storeTime; a zero state is a fresh key.
//
// A request of n hits is n cells arriving at now; the last of them has the
// theoretical arrival time max(TAT, now) + (n−1)·T and conforms when that
// is at most now + τ. Then TAT becomes max(TAT, now) + n·T.
//
// With this τ, GCRA takes exactly the decisions of tokenBucket for the same
// rule (a GCRA is a token bucket seen from the other side); it is written
// in GCRA's own terms so it can be checked against the standard.
func gcra(d *Decision, s *State, now int64, r *Rule, hits int64) {
	den := r.Limit
	capacity := r.Capacity()
	t := mulDiv(1, r.Period, den)            // emission interval T
	tau := mulDiv(capacity-1, r.Period, den) // tolerance τ
	nowM := mixed{now, 0}
	tat := loadBacklog(s, now, r).max(nowM)
	latest := nowM.add(tau, den) // the latest TAT that conforms at now
	*d = Decision{Limit: r.Limit}
	switch {
	case hits < 0 || hits > capacity:
		d.RetryAfter = Never
	case hits == 0:
		d.Allowed = true
	default:
		last := tat.add(mulDiv(hits-1, r.Period, den), den)
		if latest.less(last) {
			d.RetryAfter = last.sub(latest, den).ceil()
			break
		}
		d.Allowed = true
		tat = last.add(t, den)
		storeTime(s, tat, den)
	}
	// k more cells conform while tat + (k−1)·T <= now + τ.
	d.Remaining = latest.add(t, den).sub(tat, den).floorDiv(r.Period, den)
	d.ResetAfter = tat.sub(nowM, den).ceil()
	d.NextAfter = nextToken(tat.sub(nowM, den), capacity, r.Period, den)
}
