package limiter

import (
	"math/rand/v2"
	"testing"
)

// bucketAlgorithms are the algorithms whose state is a bucket's time.
var bucketAlgorithms = []Algorithm{TokenBucket, GCRA, LeakyBucket}

// A limit lowered keeps the backlog's hits: a bucket emptied at 12 per
// 2 s (5 hits of burst) lets the next hit in one new interval (200 ms)
// after the change, not 33 ms after it, as the time it kept (833 ms of
// backlog read against a 1 s horizon) would. Found by the robustness
// suite (seed 31337 with -robustness.apart=5s: a leaky bucket lowered
// from 12 to 10 let 42 hits through in 6.15 s, one over 5 + 12·6.15/2).
func TestALowerLimitKeepsTheBacklog(t *testing.T) {
	for _, alg := range bucketAlgorithms {
		r := Rule{Algorithm: alg, Limit: 12, Period: 2 * sec, Burst: 5}
		var s State
		for i := range 5 {
			if d := Decide(&s, t0, &r, 1); !d.Allowed {
				t.Fatalf("%v: hit %d of the burst denied: %+v", alg, i+1, d)
			}
		}
		if d := Decide(&s, t0, &r, 1); d.Allowed {
			t.Fatalf("%v: a sixth hit allowed", alg)
		}
		r.Limit = 10
		if d := Decide(&s, t0, &r, 1); d.Allowed || d.RetryAfter != 200*ms {
			t.Fatalf("%v: lowered to 10 per 2 s: %+v, want denied with retry_after 200ms", alg, d)
		}
		probe := func(at int64) Decision {
			c := s
			return Decide(&c, at, &r, 1)
		}
		if d := probe(t0 + 200*ms - 1); d.Allowed {
			t.Errorf("%v: lowered to 10 per 2 s, a hit allowed 1 ns before one interval of the new limit", alg)
		}
		if d := probe(t0 + 200*ms); !d.Allowed {
			t.Errorf("%v: lowered to 10 per 2 s, a hit denied one interval of the new limit after: %+v", alg, d)
		}
	}
}

// However the limit moves between two values, over any interval the hits
// a bucket allows stay within the larger capacity plus what the larger
// limit refills over the interval: the checker's bound (cmd/robustness/
// checker) for a rule whose limit changed.
func TestLimitChangesAllowNoMoreThanTheLargerLimit(t *testing.T) {
	type event struct{ at, hits int64 }
	for _, alg := range bucketAlgorithms {
		for run := range 200 {
			rng := rand.New(rand.NewPCG(24, uint64(run)))
			period := (1 + rng.Int64N(5)) * sec
			limits := [2]int64{1 + rng.Int64N(20), 1 + rng.Int64N(20)}
			burst := rng.Int64N(2) * (1 + rng.Int64N(10))
			r := Rule{Algorithm: alg, Period: period, Burst: burst, Limit: limits[0]}
			most, capacity := max(limits[0], limits[1]), max(burst, 0)
			if burst == 0 {
				capacity = most
			}
			var s State
			var allowed []event
			now := t0
			for range 300 {
				now += rng.Int64N(period / 4)
				if rng.IntN(10) == 0 {
					r.Limit = limits[rng.IntN(2)]
				}
				hits := 1 + rng.Int64N(2)
				if d := Decide(&s, now, &r, hits); d.Allowed {
					allowed = append(allowed, event{now, hits})
				}
			}
			for i := range allowed {
				n := int64(0)
				for j := i; j < len(allowed); j++ {
					n += allowed[j].hits
					span := allowed[j].at - allowed[i].at
					if bound := capacity + mulDiv(most, span, period).i; n > bound {
						t.Fatalf("%v run %d (limits %v per %v, burst %d): %d hits allowed in %v, more than %d",
							alg, run, limits, period, burst, n, span, bound)
					}
				}
			}
		}
	}
}
