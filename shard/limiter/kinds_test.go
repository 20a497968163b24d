package limiter

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestEffectiveLimit(t *testing.T) {
	elastic := Rule{Algorithm: TokenBucket, Limit: 100, Period: sec, ElasticPercent: 50, ElasticLoadPercent: 60}
	soft := elastic
	soft.SoftPercent, soft.Burst = 10, 20
	for _, c := range []struct {
		r               Rule
		load            float64
		limit, capacity int64
	}{
		{elastic, 0, 150, 150},
		{elastic, 0.3, 125, 125}, // half way to the threshold: half the growth
		{elastic, 0.599999, 100, 100},
		{elastic, 0.6, 100, 100}, // at the threshold: back at once
		{elastic, 0.9, 100, 100},
		{elastic, math.NaN(), 100, 100},
		{elastic, -1, 150, 150},
		{elastic, 2, 100, 100},
		{soft, 1, 110, 22},
		{soft, 0, 165, 33},
		{Rule{Limit: 3, Period: sec, SoftPercent: 50}, 0, 4, 4}, // rounded down
	} {
		if l, c2 := EffectiveLimit(&c.r, c.load); l != c.limit || c2 != c.capacity {
			t.Errorf("EffectiveLimit(%+v, %v) = %d, %d; want %d, %d", c.r, c.load, l, c2, c.limit, c.capacity)
		}
	}
	if got := soft.LogSize(); got != 165 {
		t.Errorf("LogSize = %d, want 165", got)
	}
}

func TestSoftTable(t *testing.T) {
	// 10 per window with 20% over: 12, the last two marked.
	r := Rule{Algorithm: FixedWindow, Limit: 10, Period: sec, SoftPercent: 20}
	var s State
	for i := range 13 {
		d := Decide(&s, t0, &r, 1)
		if want := i < 12; d.Allowed != want || d.Limit != 12 || d.SoftAllowanceUsed != (i >= 10 && i < 12) {
			t.Fatalf("hit %d: %+v", i+1, d)
		}
	}
	// A token bucket of 10 per second with 50% over: rate and capacity 15;
	// hits that draw the bucket deeper than 10 are marked.
	r = Rule{Algorithm: TokenBucket, Limit: 10, Period: sec, SoftPercent: 50}
	s = State{}
	d := Decide(&s, t0, &r, 10)
	if !d.Allowed || d.SoftAllowanceUsed || d.Remaining != 5 {
		t.Fatalf("10 hits: %+v", d)
	}
	if d = Decide(&s, t0, &r, 5); !d.Allowed || !d.SoftAllowanceUsed || d.Remaining != 0 {
		t.Fatalf("5 more: %+v", d)
	}
	if d = Decide(&s, t0, &r, 1); d.Allowed || d.SoftAllowanceUsed || d.RetryAfter != sec/15+1 {
		t.Fatalf("1 more: %+v", d)
	}
	// Once the bucket refills to within the base capacity, hits are not marked.
	if d = Decide(&s, t0+sec, &r, 1); !d.Allowed || d.SoftAllowanceUsed {
		t.Fatalf("a second later: %+v", d)
	}
}

func TestShadow(t *testing.T) {
	r := Rule{Algorithm: FixedWindow, Limit: 2, Period: sec, Shadow: true}
	var s State
	for i := range 4 {
		d := Decide(&s, t0, &r, 1)
		if !d.Allowed || !d.Shadow || d.ShadowDenied != (i >= 2) || d.RetryAfter != 0 {
			t.Fatalf("hit %d: %+v", i+1, d)
		}
	}
	if s.B != 2 {
		t.Fatalf("shadow counted %d hits, want the 2 it would have allowed", s.B)
	}
	// A queueing shadow rule never delays anyone.
	r = Rule{Algorithm: LeakyBucket, Limit: 1, Period: sec, Burst: 5, MaxDelay: 10 * sec, Shadow: true}
	s = State{}
	Decide(&s, t0, &r, 1)
	if d := Decide(&s, t0, &r, 1); !d.Allowed || d.Delay != 0 || d.ShadowDenied {
		t.Fatalf("queued shadow: %+v", d)
	}
	// Shadow sliding log.
	r = Rule{Algorithm: SlidingLog, Limit: 1, Period: sec, Shadow: true}
	l := Log{Times: make([]int64, r.LogSize())}
	DecideLog(&l, t0, &r, 1, 1)
	if d := DecideLog(&l, t0, &r, 1, 1); !d.Allowed || !d.ShadowDenied || l.Len != 1 {
		t.Fatalf("shadow log: %+v, %d entries", d, l.Len)
	}
}

func TestElasticFallsBackAtOnce(t *testing.T) {
	// 10 per second, up to 100% more while load is under 50%.
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		r := Rule{Algorithm: alg, Limit: 10, Period: sec, ElasticPercent: 100, ElasticLoadPercent: 50}
		var s State
		if d := DecideLoad(&s, t0, &r, 20, 0); !d.Allowed || d.Limit != 20 {
			t.Fatalf("%v at load 0: %+v", alg, d)
		}
		if d := DecideLoad(&s, t0, &r, 1, 0.5); d.Allowed || d.Limit != 10 || d.Remaining != 0 {
			t.Fatalf("%v at load 0.5: %+v", alg, d)
		}
		if d := Decide(&s, t0, &r, 0); d.Limit != 10 {
			t.Fatalf("%v via Decide: %+v, want no growth", alg, d)
		}
	}
	r := Rule{Algorithm: SlidingLog, Limit: 10, Period: sec, ElasticPercent: 100, ElasticLoadPercent: 50}
	l := Log{Times: make([]int64, r.LogSize())}
	if d := DecideLog(&l, t0, &r, 20, 0); !d.Allowed || d.Limit != 20 {
		t.Fatalf("log at load 0: %+v", d)
	}
	if d := DecideLog(&l, t0+500*ms, &r, 1, 1); d.Allowed || d.RetryAfter != 500*ms {
		// 11 of the 20 must leave: all 20 are at t0 and leave at t0+1s.
		t.Fatalf("log at load 1: %+v", d)
	}
}

func TestLimitChangeIsConservative(t *testing.T) {
	// A bucket time written under one limit and read under another is
	// rounded up, never down.
	var s State
	storeTime(&s, mixed{100, 1}, 3) // 100 + 1/3 ns
	if got := loadTime(&s, 3); got != (mixed{100, 1}) {
		t.Fatalf("same limit: %+v", got)
	}
	if got := loadTime(&s, 2); got != (mixed{100, 1}) { // 1/2 >= 1/3
		t.Fatalf("limit 2: %+v", got)
	}
	storeTime(&s, mixed{100, 2}, 3) // 100 + 2/3 ns
	if got := loadTime(&s, 2); got != (mixed{101, 0}) {
		t.Fatalf("limit 2: %+v", got)
	}
	if got := loadTime(&State{A: 100, B: 5}, 3); got != (mixed{101, 0}) { // no denominator kept
		t.Fatalf("legacy state: %+v", got)
	}
	storeTime(&s, mixed{100, MaxEffectiveLimit - 1}, MaxEffectiveLimit)
	if got := loadTime(&s, MaxEffectiveLimit); got != (mixed{100, MaxEffectiveLimit - 1}) {
		t.Fatalf("largest limit: %+v", got)
	}
}

// testKindsAgainstModel drives random arrivals through rules with soft,
// elastic and shadow settings and compares with the model run at the
// effective limit of each step. The window algorithms get a new load at
// every step (their counts do not depend on the limit, so the model stays
// exact); the buckets keep one load per sequence.
func testKindsAgainstModel(t *testing.T, alg Algorithm, seed uint64) {
	t.Parallel()
	runs, steps := propertyRuns()
	runs /= 2
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		r := randomRule(rng, alg)
		r.SoftPercent = rng.Int64N(3) * rng.Int64N(MaxSoftPercent+1) / 2
		if rng.IntN(2) == 0 {
			r.ElasticPercent, r.ElasticLoadPercent = 1+rng.Int64N(300), 1+rng.Int64N(100)
		}
		r.Shadow = rng.IntN(3) == 0
		if err := r.Validate(); err != nil {
			t.Fatalf("seed %d run %d: random rule %+v: %v", seed, run, r, err)
		}
		m, x := newModel(&r), newSubject(&r)
		now := t0 + rng.Int64N(int64(time.Hour))
		load := rng.Float64()
		var hits, retry int64 = 1, 0
		for i := range steps {
			var dt int64
			dt, hits = step(rng, &r, now, hits, retry, run%2 == 0)
			now += dt
			if !alg.UsesBurst() {
				load = rng.Float64()
			}
			var base, eff Rule
			r.effective(load, &base, &eff)
			m.limit, m.capacity = eff.Limit, eff.Burst
			m.forget(now)
			allowed, delay := m.allows(now, hits), m.delay(now)
			d := x.decide(now, &r, hits, load)
			if allowed && hits > 0 {
				m.allowed = append(m.allowed, event{now, hits})
			}
			fail := func(what string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d run %d step %d: rule %+v, load %v, %d hits: "+what,
					append([]any{seed, run, i, r, load, hits}, args...)...)
			}
			if soft := allowed && hits > 0 && m.over(now, &base); d.SoftAllowanceUsed != soft {
				fail("soft_allowance_used %v, model %v", d.SoftAllowanceUsed, soft)
			}
			if r.Shadow {
				if !d.Allowed || !d.Shadow || d.ShadowDenied == allowed || d.RetryAfter != 0 || d.Delay != 0 {
					fail("shadow decision %+v, model allows %v", d, allowed)
				}
				d.Allowed, d.RetryAfter, d.Delay = allowed, 0, delay
				if !allowed {
					continue // the RetryAfter a shadow rule would have given is not kept
				}
			}
			if err := m.check(d, now, hits, allowed, delay); err != nil {
				fail("%v", err)
			}
			retry = d.RetryAfter
		}
	}
}

func TestTokenBucketKindsModel(t *testing.T)   { testKindsAgainstModel(t, TokenBucket, 21) }
func TestGCRAKindsModel(t *testing.T)          { testKindsAgainstModel(t, GCRA, 22) }
func TestLeakyBucketKindsModel(t *testing.T)   { testKindsAgainstModel(t, LeakyBucket, 23) }
func TestFixedWindowKindsModel(t *testing.T)   { testKindsAgainstModel(t, FixedWindow, 24) }
func TestSlidingWindowKindsModel(t *testing.T) { testKindsAgainstModel(t, SlidingWindow, 25) }
func TestSlidingLogKindsModel(t *testing.T)    { testKindsAgainstModel(t, SlidingLog, 26) }
