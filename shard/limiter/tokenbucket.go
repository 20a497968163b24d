package limiter

// tokenBucket is a bucket of Capacity tokens refilled at Limit per Period,
// kept as a theoretical arrival time (TAT): the time at which the bucket
// would be full again, a mixed number kept by storeTime. A zero state is a
// full bucket.
//
// n hits are allowed at now when max(TAT, now) + n·T <= now + Capacity·T,
// with T = Period/Limit, and then TAT becomes max(TAT, now) + n·T.
func tokenBucket(d *Decision, s *State, now int64, r *Rule, hits int64) {
	den := r.Limit
	capacity := r.Capacity()
	nowM := mixed{now, 0}
	tat := loadBacklog(s, now, r).max(nowM)
	horizon := nowM.add(mulDiv(capacity, r.Period, den), den) // now + Capacity·T
	*d = Decision{Limit: r.Limit}
	switch {
	case hits < 0 || hits > capacity:
		d.RetryAfter = Never
	case hits == 0:
		d.Allowed = true
	default:
		next := tat.add(mulDiv(hits, r.Period, den), den)
		if horizon.less(next) {
			d.RetryAfter = next.sub(horizon, den).ceil()
			break
		}
		d.Allowed = true
		tat = next
		storeTime(s, tat, den)
	}
	d.Remaining = horizon.sub(tat, den).floorDiv(r.Period, den)
	d.ResetAfter = tat.sub(nowM, den).ceil()
	d.NextAfter = nextToken(tat.sub(nowM, den), capacity, r.Period, den)
}

// nextToken is the NextAfter of a bucket whose debt (its time minus now,
// in units of T = period/den) leaves Remaining = max(capacity −
// ceil(debt/T), 0): the wait until ceil(debt/T) falls by one, or to
// capacity−1 when the debt is deeper than the capacity (the limit fell).
// Zero for no debt.
func nextToken(debt mixed, capacity, period, den int64) int64 {
	k := debt.ceilDiv(period, den)
	if k <= 0 {
		return 0
	}
	return debt.sub(mulDiv(min(k, capacity)-1, period, den), den).ceil()
}
