package limiter

import "testing"

func TestGCRATable(t *testing.T) {
	// T = 1/3 s, τ = 2/3 s: three back to back, then one every 1/3 s.
	runTable(t, Rule{Algorithm: GCRA, Limit: 3, Period: sec}, []row{
		{at: t0, hits: 1, allowed: true, remaining: 2, reset: 333_333_334},
		{at: t0, hits: 2, allowed: true, remaining: 0, reset: sec},
		{at: t0, hits: 1, remaining: 0, retry: 333_333_334, reset: sec}, // 1 s − τ, rounded up
		{at: t0 + 333_333_334, hits: 1, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 333_333_334, hits: 0, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 2*sec, hits: 4, remaining: 3, retry: Never},
		{at: t0 + 2*sec, hits: 3, allowed: true, remaining: 0, reset: sec},
	})
	// Burst 5 at 1 per second: τ = 4 s admits 5 back to back.
	runTable(t, Rule{Algorithm: GCRA, Limit: 1, Period: sec, Burst: 5}, []row{
		{at: t0, hits: 5, allowed: true, remaining: 0, reset: 5 * sec},
		{at: t0 + 999*ms, hits: 1, remaining: 0, retry: 1 * ms, reset: 4*sec + 1*ms},
		{at: t0 + sec, hits: 1, allowed: true, remaining: 0, reset: 5 * sec},
		{at: t0 + 4*sec, hits: 3, allowed: true, remaining: 0, reset: 5 * sec},
		{at: t0 + 20*sec, hits: 0, allowed: true, remaining: 5},
	})
}

func TestGCRAMatchesTokenBucket(t *testing.T) {
	// With τ = (Capacity−1)·T the two are the same limiter: same answers
	// to the same arrivals, whatever the rule.
	for _, r := range []Rule{
		{Limit: 3, Period: sec},
		{Limit: 7, Period: 1_000_000_007, Burst: 11},
		{Limit: 1, Period: ms, Burst: 1},
	} {
		g, b := r, r
		g.Algorithm, b.Algorithm = GCRA, TokenBucket
		var sg, sb State
		now := t0
		for i := range 10_000 {
			hits := int64(i % 4)
			dg, db := Decide(&sg, now, &g, hits), Decide(&sb, now, &b, hits)
			if dg != db {
				t.Fatalf("rule %+v, step %d: gcra %+v, token bucket %+v", r, i, dg, db)
			}
			now += int64(i%5) * r.Period / (3 * r.Limit)
		}
	}
}
