package limiter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestRefundTokenBucketTable(t *testing.T) {
	// T = 1/3 s.
	runTable(t, Rule{Algorithm: TokenBucket, Limit: 3, Period: sec}, []row{
		{at: t0, hits: 2, allowed: true, remaining: 1, reset: 666_666_667},
		{at: t0, hits: 2, refund: true, allowed: true, remaining: 3},
		{at: t0, hits: 3, allowed: true, remaining: 0, reset: sec},
		// The TAT moves back 1/3 s, to t0 + 2/3 s.
		{at: t0 + 100*ms, hits: 1, refund: true, allowed: true, remaining: 1, reset: 566_666_667},
		// Full again at t0 + 2/3 s: nothing to give back.
		{at: t0 + 900*ms, hits: 2, refund: true, allowed: true, remaining: 3},
		{at: t0 + sec, hits: 3, allowed: true, remaining: 0, reset: sec},
		// 1.5 of the 3 hits have drained: the bucket is full, not fuller.
		{at: t0 + 1500*ms, hits: 3, refund: true, allowed: true, remaining: 3},
		{at: t0 + 1500*ms, hits: 3, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 1500*ms, hits: 1, remaining: 0, retry: 333_333_334, reset: sec},
	})
}

func TestRefundGCRATable(t *testing.T) {
	// Burst 5 at 1 per second: T = 1 s, τ = 4 s.
	runTable(t, Rule{Algorithm: GCRA, Limit: 1, Period: sec, Burst: 5}, []row{
		{at: t0, hits: 5, allowed: true, remaining: 0, reset: 5 * sec},
		{at: t0 + 999*ms, hits: 2, refund: true, allowed: true, remaining: 2, reset: 2*sec + ms},
		{at: t0 + 999*ms, hits: 2, allowed: true, remaining: 0, reset: 4*sec + ms},
		{at: t0 + 999*ms, hits: 1, remaining: 0, retry: ms, reset: 4*sec + ms},
	})
}

func TestRefundLeakyBucketTable(t *testing.T) {
	// A queue of 3 draining one hit every 500 ms; a caller waits up to 1 s.
	runTable(t, Rule{Algorithm: LeakyBucket, Limit: 2, Period: sec, Burst: 3, MaxDelay: sec}, []row{
		{at: t0, hits: 1, allowed: true, remaining: 2, reset: 500 * ms},
		{at: t0, hits: 1, allowed: true, remaining: 1, reset: sec, delay: 500 * ms},
		// The queue empties 500 ms earlier: at t0 + 500 ms.
		{at: t0 + 100*ms, hits: 1, refund: true, allowed: true, remaining: 2, reset: 400 * ms, delay: 400 * ms},
		// Only 400 ms of queue is left: it empties, no more.
		{at: t0 + 100*ms, hits: 2, refund: true, allowed: true, remaining: 3},
		{at: t0 + 100*ms, hits: 1, allowed: true, remaining: 2, reset: 500 * ms},
	})
}

func TestRefundFixedWindowTable(t *testing.T) {
	runTable(t, Rule{Algorithm: FixedWindow, Limit: 3, Period: sec}, []row{
		{at: t0 + 200*ms, hits: 2, allowed: true, remaining: 1, reset: 800 * ms},
		{at: t0 + 300*ms, hits: 2, refund: true, allowed: true, remaining: 3},
		{at: t0 + 300*ms, hits: 3, allowed: true, remaining: 0, reset: 700 * ms},
		// 4 hits cannot have been counted in a window that holds 3.
		{at: t0 + 400*ms, hits: 4, refund: true, allowed: true, remaining: 0, reset: 600 * ms},
		{at: t0 + 400*ms, hits: 1, refund: true, allowed: true, remaining: 1, reset: 600 * ms},
		{at: t0 + 400*ms, hits: 2, remaining: 1, retry: 600 * ms, reset: 600 * ms},
		// A new window: the hits counted in the last one no longer count.
		{at: t0 + 1100*ms, hits: 2, refund: true, allowed: true, remaining: 3},
		{at: t0 + 1100*ms, hits: 3, allowed: true, remaining: 0, reset: 900 * ms},
		{at: t0 + 1100*ms, hits: 1, remaining: 0, retry: 900 * ms, reset: 900 * ms},
	})
}

func TestRefundSlidingWindowTable(t *testing.T) {
	runTable(t, Rule{Algorithm: SlidingWindow, Limit: 10, Period: sec}, []row{
		{at: t0 + 500*ms, hits: 4, allowed: true, remaining: 6, reset: 1500 * ms},
		// The 4 now weigh as the previous window's: that count drops.
		{at: t0 + 1200*ms, hits: 4, refund: true, allowed: true, remaining: 10},
		{at: t0 + 1200*ms, hits: 10, allowed: true, remaining: 0, reset: 1800 * ms},
		// 10 − 4 = 6 in the previous window, weighing 6·0.5 = 3.
		{at: t0 + 2500*ms, hits: 4, refund: true, allowed: true, remaining: 7, reset: 500 * ms},
		{at: t0 + 2500*ms, hits: 2, allowed: true, remaining: 5, reset: 1500 * ms},
		// The current window holds 2: 3 hits cannot be there.
		{at: t0 + 2600*ms, hits: 3, refund: true, allowed: true, remaining: 5, reset: 1400 * ms},
		{at: t0 + 2600*ms, hits: 2, refund: true, allowed: true, remaining: 7, reset: 400 * ms},
		{at: t0 + 3500*ms, hits: 1, refund: true, allowed: true, remaining: 10},
		{at: t0 + 3500*ms, hits: 10, allowed: true, remaining: 0, reset: 1500 * ms},
	})
}

func TestRefundSlidingLogTable(t *testing.T) {
	runTable(t, Rule{Algorithm: SlidingLog, Limit: 3, Period: sec}, []row{
		{at: t0, hits: 1, allowed: true, remaining: 2, reset: sec},
		{at: t0 + 300*ms, hits: 2, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 400*ms, hits: 2, refund: true, allowed: true, remaining: 2, reset: 600 * ms},
		{at: t0 + 400*ms, hits: 2, allowed: true, remaining: 0, reset: sec},
		// The newest 3 are not one consume (t0, +400, +400): nothing.
		{at: t0 + 500*ms, hits: 3, refund: true, allowed: true, remaining: 0, reset: 900 * ms},
		{at: t0 + 1100*ms, hits: 2, refund: true, allowed: true, remaining: 3},
		{at: t0 + 1100*ms, hits: 1, allowed: true, remaining: 2, reset: sec},
		// That hit has left the window: nothing to give back.
		{at: t0 + 2100*ms, hits: 1, refund: true, allowed: true, remaining: 3},
		{at: t0 + 2100*ms, hits: 3, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 2100*ms, hits: 1, remaining: 0, retry: sec, reset: sec},
	})
}

func TestRefundKinds(t *testing.T) {
	// An elastic bucket refunds the hits in the limit they were taken
	// in: 10 hits at load 1 took 1 s (T = 100 ms); at load 0 the limit is
	// 20 (T = 50 ms), and the refund still gives back the whole second.
	r := Rule{Algorithm: TokenBucket, Limit: 10, Period: sec, ElasticPercent: 100, ElasticLoadPercent: 50}
	var s State
	if d := DecideLoad(&s, t0, &r, 10, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("consume at load 1: %+v", d)
	}
	if d := Refund(&s, t0, &r, 10, 0); !d.Allowed || d.Limit != 20 || d.Remaining != 20 || d.ResetAfter != 0 {
		t.Fatalf("refund at load 0: %+v", d)
	}

	// A soft limit: the count drops; the answer is no soft use.
	r = Rule{Algorithm: FixedWindow, Limit: 10, Period: sec, SoftPercent: 20}
	s = State{}
	if d := Decide(&s, t0, &r, 12); !d.Allowed || !d.SoftAllowanceUsed {
		t.Fatalf("soft consume: %+v", d)
	}
	if d := Refund(&s, t0, &r, 2, 1); !d.Allowed || d.SoftAllowanceUsed || d.Limit != 12 || d.Remaining != 2 {
		t.Fatalf("soft refund: %+v", d)
	}

	// Shadow: a refund of a counted consume gives it back and is marked.
	for _, alg := range []Algorithm{FixedWindow, SlidingLog} {
		r = Rule{Algorithm: alg, Limit: 2, Period: sec, Shadow: true}
		x := newSubject(&r)
		for i := range 3 {
			if d := x.decide(t0, &r, 1, 1); d.ShadowDenied != (i == 2) {
				t.Fatalf("%v shadow hit %d: %+v", alg, i+1, d)
			}
		}
		if d := x.refund(t0, &r, 1, 1); !d.Allowed || !d.Shadow || d.ShadowDenied || d.Remaining != 1 {
			t.Fatalf("%v shadow refund: %+v", alg, d)
		}
	}
}

func TestRefundWrongEntryPointPanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	log := Rule{Algorithm: SlidingLog, Limit: 1, Period: sec}
	mustPanic("Refund(sliding_log)", func() { Refund(&State{}, t0, &log, 1, 1) })
	tb := Rule{Algorithm: TokenBucket, Limit: 1, Period: sec}
	mustPanic("RefundLog(token_bucket)", func() { RefundLog(&Log{}, t0, &tb, 1, 1) })
}

func TestRefundNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, r := range benchRules {
		for _, kinds := range []bool{false, true} {
			if kinds {
				r.SoftPercent, r.ElasticPercent, r.ElasticLoadPercent, r.Shadow = 20, 100, 50, true
			}
			x := newSubject(&r)
			now := t0
			if n := testing.AllocsPerRun(1000, func() {
				now += benchStep
				x.decide(now, &r, 2, 0.25)
				x.refund(now, &r, 1, 0.25)
			}); n != 0 {
				t.Errorf("%v (kinds %v): %v allocations per consume and refund", r.Algorithm, kinds, n)
			}
		}
	}
}

// atLoad sets the model's limit and capacity to what r enforces at load,
// and returns r's limits without the soft allowance.
func (m *model) atLoad(r *Rule, load float64) (base Rule) {
	var eff Rule
	r.effective(load, &base, &eff)
	m.limit, m.capacity = eff.Limit, eff.Burst
	return base
}

// checkKinds is check for a rule that may be soft or shadow: it checks
// the marks, then the decision as enforcement would have taken it.
func (m *model) checkKinds(r *Rule, base *Rule, d Decision, t, n int64, allowed bool, delay int64) error {
	if soft := r.SoftPercent > 0 && allowed && n > 0 && m.over(t, base); d.SoftAllowanceUsed != soft {
		return fmt.Errorf("soft_allowance_used %v, model %v", d.SoftAllowanceUsed, soft)
	}
	if r.Shadow {
		if !d.Allowed || !d.Shadow || d.ShadowDenied == allowed || d.RetryAfter != 0 || d.Delay != 0 {
			return fmt.Errorf("shadow decision %+v, model allows %v", d, allowed)
		}
		if !allowed {
			return nil // the RetryAfter a shadow rule would have given is not kept
		}
		d.Delay = delay
	}
	return m.check(d, t, n, allowed, delay)
}

// randomKinds makes r soft, elastic or shadow at random, as the kinds
// property tests do.
func randomKinds(rng *rand.Rand, r *Rule) {
	r.SoftPercent = rng.Int64N(3) * rng.Int64N(MaxSoftPercent+1) / 2
	if rng.IntN(2) == 0 {
		r.ElasticPercent, r.ElasticLoadPercent = 1+rng.Int64N(300), 1+rng.Int64N(100)
	}
	r.Shadow = rng.IntN(3) == 0
}

// refundDelay picks the time from a consume to its refund: mostly moments,
// sometimes up to or across a window boundary, past the period.
func refundDelay(rng *rand.Rand, r *Rule, now int64) int64 {
	switch rng.IntN(8) {
	case 0, 1:
		return 0
	case 2:
		return 1
	case 3:
		return rng.Int64N(r.Period/r.Limit + 1)
	case 4:
		return rng.Int64N(r.Period)
	case 5:
		return r.Period - now%r.Period - rng.Int64N(2) // the next window start, or 1 ns before
	case 6:
		return r.Period + rng.Int64N(2*r.Period)
	}
	return rng.Int64N(3 * r.Period)
}

// testRefundExact: in random sequences, some allowed consumes are refunded
// after a random delay with nothing consumed in between; from the refund
// on, every decision, the refund's answer included, must be the model's
// in which that consume never happened, to the nanosecond. With kinds, the
// buckets keep one load per sequence (as testKindsAgainstModel) and the
// window algorithms get a new one at every step, the refund included.
func testRefundExact(t *testing.T, alg Algorithm, seed uint64, kinds bool) {
	t.Parallel()
	runs, steps := propertyRuns()
	runs /= 4
	refunds := 0
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		r := randomRule(rng, alg)
		load := 1.0
		if kinds {
			randomKinds(rng, &r)
			load = rng.Float64()
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("seed %d run %d: random rule %+v: %v", seed, run, r, err)
		}
		m, x := newModel(&r), newSubject(&r)
		now := t0 + rng.Int64N(int64(time.Hour))
		var hits, retry int64 = 1, 0
		newLoad := func() {
			if kinds && !alg.UsesBurst() {
				load = rng.Float64()
			}
		}
		for i := range steps {
			fail := func(what string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d run %d step %d: rule %+v, load %v, %d hits at +%v: "+what,
					append([]any{seed, run, i, r, load, hits, time.Duration(now % int64(time.Hour))}, args...)...)
			}
			var dt int64
			dt, hits = step(rng, &r, now, hits, retry, run%2 == 0)
			now += dt
			newLoad()
			base := m.atLoad(&r, load)
			m.forget(now)
			allowed, delay := m.allows(now, hits), m.delay(now)
			d := x.decide(now, &r, hits, load)
			if allowed && hits > 0 {
				m.allowed = append(m.allowed, event{now, hits})
			}
			if err := m.checkKinds(&r, &base, d, now, hits, allowed, delay); err != nil {
				fail("%v", err)
			}
			retry = d.RetryAfter
			if !allowed || hits == 0 || rng.IntN(3) != 0 {
				continue
			}
			now += refundDelay(rng, &r, now)
			newLoad()
			base = m.atLoad(&r, load)
			m.allowed = m.allowed[:len(m.allowed)-1] // the consume never happened
			m.forget(now)
			d = x.refund(now, &r, hits, load)
			if err := m.checkKinds(&r, &base, d, now, 0, true, m.delay(now)); err != nil {
				fail("refund: %v", err)
			}
			refunds++
		}
	}
	if refunds < runs {
		t.Fatalf("only %d refunds in %d runs", refunds, runs)
	}
}

// testRefundInterleaved: an allowed consume X is followed by 1–4 other
// checks, then refunded. When all of them and the refund come at X's
// instant, the refund must be exact (the model without X decides every
// later check alike). Otherwise the refund may only be conservative
// against the model without X in which the hits counted in between were
// counted at X's time: from then on, every hit the subject allows must be
// allowed by that model, fed with the subject's allowed hits.
func testRefundInterleaved(t *testing.T, alg Algorithm, seed uint64) {
	t.Parallel()
	runs, steps := propertyRuns()
	runs /= 4
	same, conservative := 0, 0
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		r := randomRule(rng, alg)
		m, x := newModel(&r), newSubject(&r)
		now := t0 + rng.Int64N(int64(time.Hour))
		var hits, retry int64 = 1, 0
		exact := true // m is the exact model of x; else a conservative one
		for i := range steps {
			fail := func(what string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d run %d step %d: rule %+v, %d hits at +%v: "+what,
					append([]any{seed, run, i, r, hits, time.Duration(now % int64(time.Hour))}, args...)...)
			}
			// decide checks n hits at now against m and records them.
			decide := func(n int64) Decision {
				allowed, delay := m.allows(now, n), m.delay(now)
				d := x.decide(now, &r, n, 1)
				if d.Allowed && n > 0 {
					m.allowed = append(m.allowed, event{now, n})
				}
				if exact {
					if err := m.check(d, now, n, allowed, delay); err != nil {
						fail("%v", err)
					}
				} else if d.Allowed && n > 0 && !allowed {
					fail("%d hits allowed; the model without the refunded hits denies them", n)
				}
				return d
			}
			var dt int64
			dt, hits = step(rng, &r, now, hits, retry, run%2 == 0)
			now += dt
			m.forget(now)
			d := decide(hits)
			retry = d.RetryAfter
			if !d.Allowed || hits == 0 || rng.IntN(4) != 0 {
				continue
			}
			k, t1 := len(m.allowed)-1, now // X
			instant := rng.IntN(3) == 0
			for range 1 + rng.IntN(4) {
				var h int64
				dt, h = step(rng, &r, now, hits, 0, true)
				if !instant {
					now += dt
				}
				decide(h) // no forget: X stays in m
			}
			if !instant {
				now += refundDelay(rng, &r, now)
			}
			m.allowed = append(m.allowed[:k], m.allowed[k+1:]...)
			for j := k; j < len(m.allowed); j++ {
				m.allowed[j].at = t1
			}
			m.forget(now)
			d = x.refund(now, &r, hits, 1)
			if exact && instant {
				if err := m.check(d, now, 0, true, m.delay(now)); err != nil {
					fail("refund at the same instant: %v", err)
				}
				same++
				continue
			}
			exact = false
			conservative++
			switch {
			case !d.Allowed || d.RetryAfter != 0:
				fail("refund answered %+v", d)
			case d.Remaining > 0 && !m.allows(now, d.Remaining):
				fail("refund leaves %d remaining; the model allows fewer", d.Remaining)
			case !m.fresh(now + d.ResetAfter):
				fail("refund leaves the key fresh after %d; the model is not", d.ResetAfter)
			}
		}
	}
	if same < runs/4 || conservative < runs/4 {
		t.Fatalf("only %d refunds at the consume's instant and %d later in %d runs", same, conservative, runs)
	}
}

func TestTokenBucketRefundModel(t *testing.T)   { testRefundExact(t, TokenBucket, 31, false) }
func TestGCRARefundModel(t *testing.T)          { testRefundExact(t, GCRA, 32, false) }
func TestLeakyBucketRefundModel(t *testing.T)   { testRefundExact(t, LeakyBucket, 33, false) }
func TestFixedWindowRefundModel(t *testing.T)   { testRefundExact(t, FixedWindow, 34, false) }
func TestSlidingWindowRefundModel(t *testing.T) { testRefundExact(t, SlidingWindow, 35, false) }
func TestSlidingLogRefundModel(t *testing.T)    { testRefundExact(t, SlidingLog, 36, false) }

func TestTokenBucketRefundKindsModel(t *testing.T)   { testRefundExact(t, TokenBucket, 41, true) }
func TestGCRARefundKindsModel(t *testing.T)          { testRefundExact(t, GCRA, 42, true) }
func TestLeakyBucketRefundKindsModel(t *testing.T)   { testRefundExact(t, LeakyBucket, 43, true) }
func TestFixedWindowRefundKindsModel(t *testing.T)   { testRefundExact(t, FixedWindow, 44, true) }
func TestSlidingWindowRefundKindsModel(t *testing.T) { testRefundExact(t, SlidingWindow, 45, true) }
func TestSlidingLogRefundKindsModel(t *testing.T)    { testRefundExact(t, SlidingLog, 46, true) }

func TestTokenBucketRefundInterleaved(t *testing.T)   { testRefundInterleaved(t, TokenBucket, 51) }
func TestGCRARefundInterleaved(t *testing.T)          { testRefundInterleaved(t, GCRA, 52) }
func TestLeakyBucketRefundInterleaved(t *testing.T)   { testRefundInterleaved(t, LeakyBucket, 53) }
func TestFixedWindowRefundInterleaved(t *testing.T)   { testRefundInterleaved(t, FixedWindow, 54) }
func TestSlidingWindowRefundInterleaved(t *testing.T) { testRefundInterleaved(t, SlidingWindow, 55) }
func TestSlidingLogRefundInterleaved(t *testing.T)    { testRefundInterleaved(t, SlidingLog, 56) }
