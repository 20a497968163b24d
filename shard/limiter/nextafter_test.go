package limiter

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// kindsOf returns r with a random limit kind on top: none, soft, elastic
// or shadow. NextAfter and RetryAfter must hold for each.
func kindsOf(rng *rand.Rand, r Rule) Rule {
	switch rng.IntN(5) {
	case 1:
		r.SoftPercent = 1 + rng.Int64N(MaxSoftPercent)
	case 2:
		r.ElasticPercent, r.ElasticLoadPercent = 1+rng.Int64N(200), 1+rng.Int64N(100)
	case 3:
		r.Shadow = true
	case 4:
		r.SoftPercent = 1 + rng.Int64N(50)
		r.ElasticPercent, r.ElasticLoadPercent = 1+rng.Int64N(200), 1+rng.Int64N(100)
	}
	return r
}

// TestWaitingIsEnough is the RateLimit header's promise, for every
// algorithm and limit kind, on a fixed clock: a caller told Remaining 0
// that waits NextAfter is allowed one hit, and a caller denied that waits
// RetryAfter is allowed the same hits. NextAfter is also exact: 1 ns
// earlier, a read reports no more remaining than the answer did, and at
// NextAfter it reports more.
func TestWaitingIsEnough(t *testing.T) {
	runs, steps := propertyRuns()
	for alg := TokenBucket; alg <= GCRA; alg++ {
		t.Run(alg.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(alg), 16))
			for run := range runs {
				r := kindsOf(rng, randomRule(rng, alg))
				if err := r.Validate(); err != nil {
					t.Fatalf("run %d: %+v: %v", run, r, err)
				}
				load := float64(rng.IntN(101)) / 100
				x := newSubject(&r)
				now := int64(1_700_000_000_000_000_000) + rng.Int64N(int64(MaxPeriod))
				var lastHits, lastRetry int64
				for i := range steps {
					dt, hits := step(rng, &r, now, lastHits, lastRetry, true)
					now += dt
					d := x.decide(now, &r, hits, load)
					lastHits, lastRetry = hits, d.RetryAfter
					if err := checkNext(x, &r, now, hits, load, d); err != "" {
						t.Fatalf("run %d step %d: rule %+v load %v: at %d, %d hits → %+v: %s", run, i, r, load, now, hits, d, err)
					}
				}
			}
		})
	}
}

// checkNext checks d, the answer to hits at now, against reads of copies
// of x at the times d names; "" when it holds.
func checkNext(x *subject, r *Rule, now, hits int64, load float64, d Decision) string {
	if d.NextAfter < 0 {
		return "negative NextAfter"
	}
	if d.NextAfter > 0 {
		if before := x.probe(now+d.NextAfter-1, r, 0, load); before.Remaining > d.Remaining {
			return "remaining grew before NextAfter: " + itoa(before.Remaining)
		}
		if at := x.probe(now+d.NextAfter, r, 0, load); at.Remaining <= d.Remaining {
			return "remaining did not grow at NextAfter: " + itoa(at.Remaining)
		}
	} else if later := x.probe(now+d.ResetAfter+2*r.Period, r, 0, load); later.Remaining > d.Remaining {
		return "NextAfter 0, but remaining grows later: " + itoa(later.Remaining)
	}
	if d.Remaining == 0 && d.NextAfter > 0 {
		if a := x.probe(now+d.NextAfter, r, 1, load); !allowed(a) {
			return "waiting NextAfter with remaining 0 is not enough for 1 hit"
		}
	}
	denied := !d.Allowed || d.ShadowDenied
	if denied && hits > 0 {
		retry := d.RetryAfter
		if r.Shadow {
			// A shadow answer carries no RetryAfter: ask enforcement.
			e := *r
			e.Shadow = false
			retry = x.probe(now, &e, hits, load).RetryAfter
		}
		if retry != Never && !allowed(x.probe(now+retry, r, hits, load)) {
			return "waiting RetryAfter is not enough for the same hits"
		}
	}
	return ""
}

func allowed(d Decision) bool { return d.Allowed && !d.ShadowDenied }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
