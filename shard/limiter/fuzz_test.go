package limiter

import (
	"testing"
)

// fuzzRule builds a rule from fuzzed fields; ok is false when the rule
// would not pass Validate (callers never decide with such a rule).
func fuzzRule(alg uint8, limit, period, burst, maxDelay, soft, elastic, elasticLoad int64, shadow bool) (Rule, bool) {
	r := Rule{
		Algorithm: Algorithm(alg%uint8(len(algorithmNames)-1) + 1),
		Limit:     limit, Period: period, Burst: burst, MaxDelay: maxDelay,
		SoftPercent: soft, ElasticPercent: elastic, ElasticLoadPercent: elasticLoad,
		Shadow: shadow,
	}
	return r, r.Validate() == nil
}

// checkDecision holds for every decision, whatever state it was made from:
// Remaining is never negative nor over what the rule can ever allow at
// once (its limit, or a bucket's capacity, with the full soft and elastic
// growth), and the waits are never negative.
func checkDecision(t *testing.T, what string, d Decision, r *Rule) {
	t.Helper()
	limit, capacity := EffectiveLimit(r, 0)
	if !r.Algorithm.UsesBurst() {
		capacity = limit
	}
	if d.Remaining < 0 || d.Remaining > capacity {
		t.Fatalf("%s under %+v: remaining %d not in 0..%d", what, *r, d.Remaining, capacity)
	}
	if d.ResetAfter < 0 || d.RetryAfter < 0 || d.Delay < 0 {
		t.Fatalf("%s under %+v: negative wait: %+v", what, *r, d)
	}
	if d.Allowed && d.RetryAfter != 0 {
		t.Fatalf("%s under %+v: allowed with retry_after %d", what, *r, d.RetryAfter)
	}
}

// FuzzDecide decides and refunds on arbitrary states, as a hand-off or a
// corrupted import could leave them: no panic, and no answer outside the
// rule's bounds.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0), int64(10), int64(1e9), int64(0), int64(0), int64(0), int64(0), int64(0), false, int64(0), int64(0), int64(1e18), int64(1), 1.0)
	f.Add(uint8(2), int64(5), int64(60e9), int64(0), int64(0), int64(0), int64(0), int64(0), false, int64(1e18), int64(-7), int64(1e18+5), int64(1), 1.0)
	f.Add(uint8(4), int64(100), int64(1e6), int64(0), int64(0), int64(20), int64(0), int64(0), true, int64(1e18), int64(1<<40|3), int64(1e18), int64(3), 0.5)
	f.Add(uint8(1), int64(7), int64(1e9), int64(0), int64(5e8), int64(0), int64(100), int64(50), false, int64(-1), int64(-1), int64(5), int64(2), 0.1)
	f.Add(uint8(5), int64(1e9), int64(1e6), int64(1e9), int64(0), int64(100), int64(0), int64(0), false, int64(1<<62), int64(1<<62), int64(1<<62), int64(1e9), 0.0)
	f.Fuzz(func(t *testing.T, alg uint8, limit, period, burst, maxDelay, soft, elastic, elasticLoad int64, shadow bool, a, b, now, hits int64, load float64) {
		r, ok := fuzzRule(alg, limit, period, burst, maxDelay, soft, elastic, elasticLoad, shadow)
		if !ok || r.Algorithm.UsesLog() || now < 0 || now > MaxNow {
			return
		}
		s := State{A: a, B: b}
		checkDecision(t, "decide", DecideLoad(&s, now, &r, hits, load), &r)
		checkDecision(t, "read", DecideLoad(&s, now, &r, 0, load), &r)
		if hits > 0 {
			checkDecision(t, "refund", Refund(&s, now, &r, hits, load), &r)
		}
		m := Merge(r.Algorithm, s, State{A: b, B: a})
		checkDecision(t, "merged", DecideLoad(&m, now, &r, 0, load), &r)
	})
}

// FuzzDecideLog is FuzzDecide for sliding_log, on arbitrary rings: any
// head and length, with times in the order every writer keeps them (push
// and MergeLog write oldest first), anywhere from the future to long ago.
func FuzzDecideLog(f *testing.F) {
	f.Add(int64(10), int64(1e9), int64(0), int64(0), int64(0), false, []byte{1, 2, 3}, 0, 2, int64(1e18), int64(1), 1.0)
	f.Add(int64(3), int64(1e6), int64(50), int64(100), int64(10), true, []byte{255, 0, 255, 0}, 7, -1, int64(5), int64(4), 0.0)
	f.Fuzz(func(t *testing.T, limit, period, soft, elastic, elasticLoad int64, shadow bool, times []byte, head, n int, now, hits int64, load float64) {
		r, ok := fuzzRule(uint8(SlidingLog-1), limit, period, 0, 0, soft, elastic, elasticLoad, shadow)
		if !ok || now < 0 || now > MaxNow || r.LogSize() > 1000 {
			return
		}
		l := Log{Times: make([]int64, r.LogSize()), Head: head, Len: n}
		// Entry k from the head is k-th oldest; newer by the fuzzed steps.
		at := now - 2*r.Period
		for k := range l.Times {
			if k < len(times) {
				at += int64(times[k]) * r.Period / 64
			}
			l.Times[(max(head, 0)+k)%len(l.Times)] = at
		}
		checkDecision(t, "decide", DecideLog(&l, now, &r, hits, load), &r)
		if hits > 0 {
			checkDecision(t, "refund", RefundLog(&l, now, &r, hits, load), &r)
		}
		checkDecision(t, "read", DecideLog(&l, now, &r, 0, load), &r)
	})
}
