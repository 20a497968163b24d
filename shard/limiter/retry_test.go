package limiter

import (
	"math/rand/v2"
	"testing"
	"time"
)

// bigRule returns a valid rule anywhere in the bounds, kinds included,
// far past what the model can check: here only the decisions' own
// promises are tested.
func bigRule(rng *rand.Rand, alg Algorithm) Rule {
	for {
		r := Rule{
			Algorithm: alg,
			Limit:     1 + rng.Int64N([]int64{10, 1000, MaxLimit}[rng.IntN(3)]),
			Period:    int64(MinPeriod) + rng.Int64N([]int64{int64(time.Second), int64(time.Hour), int64(MaxPeriod - MinPeriod)}[rng.IntN(3)]),
		}
		if alg.UsesBurst() && rng.IntN(2) == 0 {
			r.Burst = 1 + rng.Int64N(r.Limit*4)
		}
		if alg == LeakyBucket && rng.IntN(2) == 0 {
			r.MaxDelay = rng.Int64N(int64(MaxPeriod))
		}
		if alg == SlidingLog {
			r.Limit = 1 + r.Limit%1000 // keep the rings small
		}
		if rng.IntN(3) == 0 {
			r.SoftPercent = rng.Int64N(MaxSoftPercent + 1)
		}
		if rng.IntN(3) == 0 {
			r.ElasticPercent = 1 + rng.Int64N(MaxElasticPercent)
			r.ElasticLoadPercent = 1 + rng.Int64N(100)
		}
		if r.Validate() == nil {
			return r
		}
	}
}

// TestRetryAfterExact: for every algorithm, over rules anywhere in the
// bounds and a load that moves, a denied caller that waits exactly
// RetryAfter and retries the same hits is allowed, and one that waits
// 1 ns less is not.
func TestRetryAfterExact(t *testing.T) {
	const seed = 7
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			runs := 300
			if testing.Short() {
				runs = 50
			}
			for run := range runs {
				rng := rand.New(rand.NewPCG(seed, uint64(run)))
				r := bigRule(rng, alg)
				x := newSubject(&r)
				now := rng.Int64N(MaxNow / 2)
				load := rng.Float64()
				for i := 0; i < 60 && now <= MaxNow; i++ {
					most, _ := EffectiveLimit(&r, load)
					if alg.UsesBurst() {
						_, most = EffectiveLimit(&r, load)
					}
					hits := []int64{0, 1, 1 + rng.Int64N(most), most, most + 1, 1 << 62}[rng.IntN(6)]
					d := x.decide(now, &r, hits, load)
					switch {
					case d.Allowed:
						if d.RetryAfter != 0 {
							t.Fatalf("seed %d run %d step %d: allowed with retry_after %d", seed, run, i, d.RetryAfter)
						}
					case hits > most:
						if d.RetryAfter != Never {
							t.Fatalf("seed %d run %d step %d: %d hits over %d: retry_after %d", seed, run, i, hits, most, d.RetryAfter)
						}
					default:
						ra := d.RetryAfter
						if ra <= 0 || ra == Never {
							t.Fatalf("seed %d run %d step %d: rule %+v: denied %d hits with retry_after %d", seed, run, i, r, hits, ra)
						}
						if p := x.probe(now+ra-1, &r, hits, load); p.Allowed {
							t.Fatalf("seed %d run %d step %d: rule %+v: %d hits allowed at retry_after−1 (%d)", seed, run, i, r, hits, ra)
						}
						if p := x.probe(now+ra, &r, hits, load); !p.Allowed {
							t.Fatalf("seed %d run %d step %d: rule %+v: %d hits denied at retry_after %d: %+v", seed, run, i, r, hits, ra, p)
						}
					}
					switch rng.IntN(4) {
					case 0: // same instant
					case 1:
						if !d.Allowed && d.RetryAfter != Never {
							now += d.RetryAfter
						}
					case 2:
						now += rng.Int64N(r.Period/r.Limit + 1)
					default:
						now += rng.Int64N(r.Period)
					}
					if rng.IntN(8) == 0 {
						load = rng.Float64()
					}
				}
			}
		})
	}
}

var algorithms = []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingLog, SlidingWindow, GCRA}

// TestExactOverPeriods: hitting as fast as allowed (retrying at exactly
// RetryAfter) for 100 periods admits exactly what the algorithm promises,
// whatever the rounding of period/limit.
func TestExactOverPeriods(t *testing.T) {
	for _, period := range []int64{sec, 1_000_000_007, 3 * ms} {
		for _, c := range []struct {
			alg  Algorithm
			want int64 // with limit 7, burst 0, over [0, 100·period]
		}{
			{TokenBucket, 7 + 700},
			{GCRA, 7 + 700},
			{LeakyBucket, 7 + 700}, // a queue of 7, callers that wait as long as it takes
			{FixedWindow, 101 * 7},
			{SlidingLog, 101 * 7},
		} {
			r := Rule{Algorithm: c.alg, Limit: 7, Period: period}
			if c.alg == LeakyBucket {
				r.MaxDelay = period
			}
			x := newSubject(&r)
			now, end, allowed := int64(0), 100*period, int64(0)
			for now <= end {
				d := x.decide(now, &r, 1, 1)
				if d.Allowed {
					allowed++
					continue
				}
				now += d.RetryAfter
			}
			if allowed != c.want {
				t.Errorf("%v, period %d: allowed %d, want %d", c.alg, period, allowed, c.want)
			}
		}
	}
}

// TestClockBack: when now goes back, no algorithm admits what it would
// deny at the latest now it has seen, and none panics.
func TestClockBack(t *testing.T) {
	const seed = 11
	for _, alg := range algorithms {
		for run := range 200 {
			rng := rand.New(rand.NewPCG(seed, uint64(run)))
			r := randomRule(rng, alg)
			x := newSubject(&r)
			latest := t0
			for i := range 100 {
				now := latest + rng.Int64N(r.Period) - r.Period/2
				hits := rng.Int64N(r.Limit + 1)
				atLatest := x.probe(latest, &r, hits, 1)
				d := x.decide(now, &r, hits, 1)
				if now < latest && d.Allowed && !atLatest.Allowed {
					t.Fatalf("%v seed %d run %d step %d: %d hits allowed at latest−%v, denied at latest", alg, seed, run, i, hits, time.Duration(latest-now))
				}
				if !d.Allowed && (d.RetryAfter <= 0 || d.Remaining < 0) {
					t.Fatalf("%v seed %d run %d step %d: %+v", alg, seed, run, i, d)
				}
				latest = max(latest, now)
			}
		}
	}
}
