package limiter

import "testing"

func oldTokenBucket(s *State, now int64, r *Rule, hits int64) Decision {
	den := r.Limit
	capacity := r.Capacity()
	tat := mixed{s.A, s.B}
	nowM := mixed{now, 0}
	if tat.less(nowM) {
		tat = nowM
	}
	horizon := nowM.add(mulDiv(capacity, r.Period, den), den) // now + Capacity·T
	next := tat.add(mulDiv(hits, r.Period, den), den)
	d := Decision{Limit: r.Limit}
	if hits > capacity {
		d.RetryAfter = Never
	} else if horizon.less(next) {
		d.RetryAfter = next.sub(horizon, den).ceil()
	} else {
		d.Allowed = true
		tat = next
		s.A, s.B = tat.i, tat.f
	}
	d.Remaining = horizon.sub(tat, den).floorDiv(r.Period, den)
	d.ResetAfter = tat.sub(nowM, den).ceil()
	return d
}

func oldDecide(s *State, now int64, r *Rule, hits int64) Decision {
	switch r.Algorithm {
	case TokenBucket:
		return oldTokenBucket(s, now, r, hits)
	}
	panic("limiter: algorithm not implemented: " + r.Algorithm.String())
}

var sink Decision

func BenchmarkTmpOld(b *testing.B) {
	r := benchRules[0]
	var s State
	now := t0
	for b.Loop() {
		now += benchStep
		sink = oldDecide(&s, now, &r, 1)
	}
}
func BenchmarkTmpNew(b *testing.B) {
	r := benchRules[0]
	var s State
	now := t0
	for b.Loop() {
		now += benchStep
		sink = Decide(&s, now, &r, 1)
	}
}
func BenchmarkTmpNewDirect(b *testing.B) {
	r := benchRules[0]
	var s State
	now := t0
	for b.Loop() {
		now += benchStep
		sink = tokenBucket(&s, now, &r, 1)
	}
}
