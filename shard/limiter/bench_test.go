package limiter

import "testing"

// benchRules are the rules the benchmarks and the allocation test run:
// one per algorithm, with a limit that is no divisor of the period.
var benchRules = []Rule{
	{Algorithm: TokenBucket, Limit: 100, Period: 1_000_000_007, Burst: 150},
	{Algorithm: GCRA, Limit: 100, Period: 1_000_000_007, Burst: 150},
	{Algorithm: LeakyBucket, Limit: 100, Period: 1_000_000_007, Burst: 150, MaxDelay: 100 * ms},
	{Algorithm: FixedWindow, Limit: 100, Period: 1_000_000_007},
	{Algorithm: SlidingWindow, Limit: 100, Period: 1_000_000_007},
	{Algorithm: SlidingLog, Limit: 100, Period: 1_000_000_007},
}

// benchStep advances time by about a fortieth of the emission interval
// per check on average, so the key runs over its limit and a mix of
// allowed and denied decisions is measured.
const benchStep = 250_000

// benchDecision keeps the benchmarked decisions alive.
var benchDecision Decision

// BenchmarkDecide measures one decision as the store makes it: Decide, or
// DecideLog for sliding_log.
func BenchmarkDecide(b *testing.B) {
	for _, r := range benchRules {
		b.Run(r.Algorithm.String(), func(b *testing.B) {
			b.ReportAllocs()
			var s State
			l := Log{Times: make([]int64, r.LogSize())}
			now := t0
			if r.Algorithm.UsesLog() {
				for b.Loop() {
					now += benchStep
					benchDecision = DecideLog(&l, now, &r, 1, 1)
				}
				return
			}
			for b.Loop() {
				now += benchStep
				benchDecision = Decide(&s, now, &r, 1)
			}
		})
	}
}

// BenchmarkDecideKinds runs the same rules as soft (20%), elastic (up to
// 100% under 50% load, at load 0.25) and shadow, through DecideLoad.
func BenchmarkDecideKinds(b *testing.B) {
	for _, r := range benchRules {
		r.SoftPercent, r.ElasticPercent, r.ElasticLoadPercent, r.Shadow = 20, 100, 50, true
		b.Run(r.Algorithm.String(), func(b *testing.B) {
			b.ReportAllocs()
			var s State
			l := Log{Times: make([]int64, r.LogSize())}
			now := t0
			if r.Algorithm.UsesLog() {
				for b.Loop() {
					now += benchStep
					benchDecision = DecideLog(&l, now, &r, 1, 0.25)
				}
				return
			}
			for b.Loop() {
				now += benchStep
				benchDecision = DecideLoad(&s, now, &r, 1, 0.25)
			}
		})
	}
}

func TestNoAllocations(t *testing.T) {
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
				x.decide(now, &r, 1+now%3, 0.25)
			}); n != 0 {
				t.Errorf("%v (kinds %v): %v allocations per decision", r.Algorithm, kinds, n)
			}
		}
	}
}
