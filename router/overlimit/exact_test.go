package overlimit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardlimit/shardlimit/shard/limiter"
)

// key is a key's state under any algorithm: a State, or a Log.
type keyState struct {
	s   limiter.State
	log limiter.Log
}

func (k *keyState) clone() *keyState {
	c := *k
	c.log.Times = slices.Clone(k.log.Times)
	return &c
}

func (k *keyState) decide(r *limiter.Rule, now, hits int64) limiter.Decision {
	if r.Algorithm.UsesLog() {
		return limiter.DecideLog(&k.log, now, r, hits, 1)
	}
	return limiter.Decide(&k.s, now, r, hits)
}

func newKey(r *limiter.Rule) *keyState {
	return &keyState{log: limiter.Log{Times: make([]int64, r.LogSize())}}
}

// The property Exact promises, checked against the shard's algorithms: for
// every denial Exact accepts, the algorithm, asked again with the same hits
// at any time before the retry time with nothing allowed in between, denies
// with the same limit and remaining and with the waits Denial.At gives;
// and at the retry time it allows. Random rules of every algorithm, with
// and without a soft allowance, and random traffic reach every branch
// (each case counts the held denials it checked).
func TestExactDenialsAreTheShardsUntilTheirRetryTime(t *testing.T) {
	const ms = int64(1_000_000)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, alg := range []limiter.Algorithm{limiter.TokenBucket, limiter.LeakyBucket, limiter.FixedWindow, limiter.SlidingLog, limiter.SlidingWindow, limiter.GCRA} {
		for _, variant := range []string{"plain", "burst", "soft", "max_delay"} {
			if variant == "max_delay" && alg != limiter.LeakyBucket {
				continue
			}
			name := fmt.Sprint(alg, "/", variant)
			t.Run(name, func(t *testing.T) {
				checked := 0
				for range 200 {
					r := limiter.Rule{Algorithm: alg, Limit: 1 + rng.Int64N(5), Period: ms * (1 + rng.Int64N(20))}
					switch variant {
					case "burst":
						r.Burst = 1 + rng.Int64N(8)
					case "soft":
						r.SoftPercent = 50
					case "max_delay":
						r.MaxDelay = rng.Int64N(r.Period)
					}
					if err := r.Validate(); err != nil {
						t.Fatal(err)
					}
					checked += exactRun(t, rng, &r)
				}
				if checked < 100 {
					t.Fatalf("only %d held denials checked", checked)
				}
			})
		}
	}
}

// exactRun drives one key with random traffic under r and checks every
// denial Exact accepts; it returns how many.
func exactRun(t *testing.T, rng *rand.Rand, r *limiter.Rule) int {
	t.Helper()
	k := newKey(r)
	most, capacity := limiter.EffectiveLimit(r, 1)
	if r.Algorithm == limiter.TokenBucket || r.Algorithm == limiter.LeakyBucket || r.Algorithm == limiter.GCRA {
		most = capacity
	}
	now := int64(1_700_000_000) * 1_000_000_000
	checked := 0
	for range 40 {
		now += rng.Int64N(r.Period / 2)
		hits := 1 + rng.Int64N(min(most, 3))
		d := k.decide(r, now, hits)
		if d.Allowed || !Exact(r, hits) {
			continue
		}
		den, ok := Denied(now, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay)
		if !ok {
			t.Fatalf("%+v: hits %d: finite denial %+v not held", r, hits, d)
		}
		checked++
		probes := []int64{now, min(now+1, den.RetryAt-1), den.RetryAt - 1}
		for range 5 {
			probes = append(probes, now+rng.Int64N(den.RetryAt-now))
		}
		for _, at := range probes {
			got := k.clone().decide(r, at, hits)
			retry, reset, delay := den.At(at)
			want := limiter.Decision{Limit: den.Limit, Remaining: den.Remaining, RetryAfter: retry, ResetAfter: reset, Delay: delay, NextAfter: den.NextAfter(at, hits)}
			if got != want {
				t.Fatalf("%+v: hits %d denied at %d (%+v); at +%d the shard answers %+v, the cache %+v",
					r, hits, now, d, at-now, got, want)
			}
		}
		if got := k.clone().decide(r, den.RetryAt, hits); !got.Allowed {
			t.Fatalf("%+v: hits %d denied at %d (%+v); still denied at its retry time: %+v", r, hits, now, d, got)
		}
	}
	return checked
}

// Where Exact says no, a held answer would be wrong: these are the cases
// that show it, one per reason.
func TestExactRefusesWhereTheShardWouldAnswerOtherwise(t *testing.T) {
	const s = int64(1_000_000_000)
	t0 := 1_000 * s
	for _, tc := range []struct {
		name  string
		r     limiter.Rule
		setup [][2]int64 // requests allowed before the denial: {time after t0, hits}
		hits  int64
		later int64 // time after t0 at which the shard answers otherwise
		load  float64
	}{
		// 4 of 4 tokens used; 2 hits wait 2 s, but after 1 s one token is back.
		{"token bucket, 2 hits: remaining grows", limiter.Rule{Algorithm: limiter.TokenBucket, Limit: 4, Period: 4 * s}, [][2]int64{{0, 4}}, 2, s, 1},
		{"gcra, 2 hits: remaining grows", limiter.Rule{Algorithm: limiter.GCRA, Limit: 4, Period: 4 * s}, [][2]int64{{0, 4}}, 2, s, 1},
		{"sliding log, 2 hits: remaining grows", limiter.Rule{Algorithm: limiter.SlidingLog, Limit: 2, Period: 4 * s}, [][2]int64{{-2 * s, 1}, {0, 1}}, 2, 2 * s, 1},
		{"sliding window, 2 hits: remaining grows", limiter.Rule{Algorithm: limiter.SlidingWindow, Limit: 2, Period: 4 * s}, [][2]int64{{-4 * s, 2}}, 2, 2 * s, 1},
		// A full queue of 4: 2 hits fit once two have drained (2 s), but
		// after 1 s one place is free: remaining 1.
		{"leaky bucket, 2 hits: remaining grows", limiter.Rule{Algorithm: limiter.LeakyBucket, Limit: 4, Period: 4 * s}, [][2]int64{{0, 4}}, 2, s, 1},
		{"leaky bucket with max_delay, 2 hits: remaining grows", limiter.Rule{Algorithm: limiter.LeakyBucket, Limit: 4, Period: 4 * s, MaxDelay: 3 * s}, [][2]int64{{0, 4}}, 2, s, 1},
		// An elastic rule grows while load is low: the denial at load 1 is
		// an allow at load 0, at once.
		{"elastic", limiter.Rule{Algorithm: limiter.FixedWindow, Limit: 4, Period: 4 * s, ElasticPercent: 100, ElasticLoadPercent: 50}, [][2]int64{{0, 4}}, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKey(&tc.r)
			for _, h := range tc.setup {
				if d := k.decideLoad(&tc.r, t0+h[0], h[1], 1); !d.Allowed {
					t.Fatalf("setup %v denied: %+v", h, d)
				}
			}
			d := k.decideLoad(&tc.r, t0, tc.hits, 1)
			if d.Allowed || d.RetryAfter <= tc.later {
				t.Fatalf("not denied past +%d: %+v", tc.later, d)
			}
			later := k.clone().decideLoad(&tc.r, t0+tc.later, tc.hits, tc.load)
			if later.Allowed == d.Allowed && later.Remaining == d.Remaining {
				t.Fatalf("the shard answers the same at +%d (%+v): the case shows nothing", tc.later, later)
			}
			if Exact(&tc.r, tc.hits) {
				t.Fatalf("Exact accepts it, but at +%d the shard answers %+v, not %+v", tc.later, later, d)
			}
		})
	}
	if Exact(&limiter.Rule{Algorithm: limiter.FixedWindow, Limit: 1, Period: s, Shadow: true}, 1) {
		t.Error("Exact accepts a shadow rule, which never denies")
	}
	if Exact(&limiter.Rule{Algorithm: limiter.FixedWindow, Limit: 1, Period: s}, 0) {
		t.Error("Exact accepts a read (hits 0), which is never denied")
	}
}

func (k *keyState) decideLoad(r *limiter.Rule, now, hits int64, load float64) limiter.Decision {
	if r.Algorithm.UsesLog() {
		return limiter.DecideLog(&k.log, now, r, hits, load)
	}
	return limiter.DecideLoad(&k.s, now, r, hits, load)
}

func TestVersionsChangeExactlyWithTheRule(t *testing.T) {
	tb := limiter.Rule{Algorithm: limiter.TokenBucket, Limit: 10, Period: 1e9}
	raised := tb
	raised.Limit = 20
	var v Versions
	first := v.Assign([]Rule{{"shop", "a", tb}, {"shop", "b", tb}, {"bank", "a", tb}})
	if first[0] == first[1] || first[0] == first[2] || first[1] == first[2] {
		t.Fatalf("distinct rules share a version: %v", first)
	}
	// Reordered, one raised, one removed, one added.
	second := v.Assign([]Rule{{"bank", "a", tb}, {"shop", "a", raised}, {"shop", "c", tb}})
	if second[0] != first[2] {
		t.Errorf("an unchanged rule got a new version: %d → %d", first[2], second[0])
	}
	if second[1] == first[0] {
		t.Errorf("a raised limit kept the version %d", first[0])
	}
	for _, old := range first {
		if second[2] == old {
			t.Errorf("a new rule reuses version %d", old)
		}
	}
	// A rule that left and comes back, even unchanged, gets a new version:
	// its old entries may predate whatever happened in between.
	third := v.Assign([]Rule{{"shop", "b", tb}})
	if third[0] == first[1] {
		t.Errorf("a returning rule kept its old version %d", first[1])
	}
}
