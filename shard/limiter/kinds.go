package limiter

import "math"

// The limit kinds (soft, elastic, shadow) wrap any algorithm without
// touching it: elastic and soft change the limit and capacity the
// algorithm is run with, shadow changes only the answer.
//
// The soft allowance is marked used when the hits were allowed and leave
// the key over the limit without the allowance (base): more hits counted
// in the window than base's limit, or a bucket drawn deeper than base's
// capacity (queue longer than base's queue). For the window algorithms
// that is exactly "base would have denied these hits".

// EffectiveLimit returns the limit and capacity rule r enforces when the
// caller's load is load, in [0, 1] (clamped; NaN counts as 1).
//
// Elastic growth comes first. With the threshold θ = ElasticLoadPercent/100
// and load under θ, Limit and Capacity() each become
//
//	x + floor(x · ElasticPercent/100 · (θ − load)/θ)
//
// so the full ElasticPercent at load 0, shrinking linearly to nothing at
// θ; at or over θ they are as written. Load is read in millionths, rounded
// up. It is a function of the load now and nothing else: the limit falls
// back at once, and a caller that wants it to move slowly smooths the load
// it passes.
//
// The soft allowance then raises each result x to x + floor(x·SoftPercent/100).
func EffectiveLimit(r *Rule, load float64) (limit, capacity int64) {
	var base, eff Rule
	r.effective(load, &base, &eff)
	return eff.Limit, eff.Burst
}

// hasKinds reports whether r is anything but a plain, enforced limit.
func (r *Rule) hasKinds() bool {
	return r.SoftPercent != 0 || r.ElasticPercent != 0 || r.Shadow
}

// effective sets base to r grown for load and eff to base raised by the
// soft allowance, both with Burst set to their capacity. (It fills them in
// place: returning two Rules by value cost more than the decision.)
func (r *Rule) effective(load float64, base, eff *Rule) {
	ppm := loadMillionths(load)
	*base = *r
	base.Limit = r.grow(r.Limit, ppm)
	base.Burst = r.grow(r.Capacity(), ppm)
	*eff = *base
	eff.Limit += base.Limit * r.SoftPercent / 100
	eff.Burst += base.Burst * r.SoftPercent / 100
}

// grow applies the elastic growth at a load of ppm millionths to x.
// x <= MaxBurst, so x·ElasticPercent·10^6 fits an int64.
func (r *Rule) grow(x, ppm int64) int64 {
	threshold := r.ElasticLoadPercent * 10_000
	if r.ElasticPercent == 0 || ppm >= threshold {
		return x
	}
	return x + x*r.ElasticPercent*(threshold-ppm)/(100*threshold)
}

// loadMillionths reads a load in [0, 1] as millionths, rounding up.
func loadMillionths(load float64) int64 {
	switch {
	case load <= 0:
		return 0
	case load < 1:
		return int64(math.Ceil(load * 1e6))
	}
	return 1_000_000 // 1, over 1, or NaN
}

// overBase reports whether the key, after eff allowed hits, uses more than
// base allows: more hits counted than base's limit, or for a bucket, more
// than base's capacity of debt (in eff's hits: TAT − now > base
// capacity·Period/eff limit). That is the mark of the soft allowance. For
// the window algorithms it is exactly "base would have denied these hits".
func overBase(s *State, now int64, eff, base *Rule) bool {
	switch eff.Algorithm {
	case TokenBucket, GCRA, LeakyBucket:
		den := eff.Limit
		debt := loadBacklog(s, now, eff).sub(mixed{now, 0}, den)
		return mulDiv(base.Capacity(), eff.Period, den).less(debt)
	case FixedWindow:
		return s.B > base.Limit
	case SlidingWindow:
		elapsed := max(now-s.A, 0)
		return !weightedFits(hi32(s.B), s.B&low32, eff.Period-elapsed, eff.Period, base.Limit)
	}
	return false
}

// finish applies the soft mark and shadow mode to a decision.
func (r *Rule) finish(d *Decision, soft bool) {
	d.SoftAllowanceUsed = soft
	if r.Shadow {
		d.Shadow, d.ShadowDenied = true, !d.Allowed
		d.Allowed, d.RetryAfter, d.Delay = true, 0, 0
	}
}
