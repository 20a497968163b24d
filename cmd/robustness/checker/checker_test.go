package checker

import (
	"strings"
	"testing"
	"time"
)

// t0 is an instant on a whole minute (windows of 1m and 1s align on it).
var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// ops returns n checks of key under rule, each of 1 hit, the i-th sent at
// from + i·step and answered rtt later, with the outcome given.
func ops(key, rule string, n int, from, step, rtt time.Duration, o Outcome) []Op {
	var out []Op
	for i := range n {
		s := at(from + time.Duration(i)*step)
		out = append(out, Op{Key: key, Rule: rule, Hits: 1, Send: s, Recv: s.Add(rtt), Outcome: o})
	}
	return out
}

func check(t *testing.T, rules map[string]Rule, history ...[]Op) []Violation {
	t.Helper()
	var all []Op
	for _, h := range history {
		all = append(all, h...)
	}
	vs, err := Check(rules, all, nil)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestBucketAlgorithmsAllowBurstPlusRate(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, GCRA, LeakyBucket} {
		rules := map[string]Rule{"r": {Algorithm: alg, Limit: 60, Period: time.Minute, Burst: 5}}
		// 5 back to back, then one a second: exactly burst + rate.
		ok := check(t, rules, ops("k", "r", 5, 0, time.Millisecond, time.Millisecond, Allowed),
			ops("k", "r", 10, time.Second, time.Second, time.Millisecond, Allowed))
		if len(ok) != 0 {
			t.Errorf("%s: burst then the rate: %v, want no violation", alg, ok)
		}
		// 8 within 100ms: 3 more than the burst (rate adds 0 in 100ms).
		vs := check(t, rules, ops("k", "r", 8, 0, 10*time.Millisecond, time.Millisecond, Allowed))
		if len(vs) != 1 || vs[0].Allowed != 8 || vs[0].Bound != 5 {
			t.Fatalf("%s: 8 in 100ms against a burst of 5: %v, want one violation of 8 > 5", alg, vs)
		}
	}
}

// Checks whose answers took long cannot be placed: 8 checks each in
// flight for 10 s may have been decided over 10 s, when the rate allows
// 5 + 10. No violation, though 8 > 5 were allowed "at once" by send time.
func TestUncertainChecksAreNotBlamed(t *testing.T) {
	rules := map[string]Rule{"r": {Algorithm: TokenBucket, Limit: 60, Period: time.Minute, Burst: 5}}
	if vs := check(t, rules, ops("k", "r", 8, 0, time.Millisecond, 10*time.Second, Allowed)); len(vs) != 0 {
		t.Fatalf("slow answers: %v, want none", vs)
	}
}

func TestWindowAlgorithmsCountAlignedWindows(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		rules := map[string]Rule{"r": {Algorithm: alg, Limit: 10, Period: time.Second}}
		// 10 at the end of one window and 10 at the start of the next:
		// 20 within 200ms, and correct.
		if vs := check(t, rules, ops("k", "r", 10, 800*time.Millisecond, 10*time.Millisecond, time.Millisecond, Allowed),
			ops("k", "r", 10, time.Second, 10*time.Millisecond, time.Millisecond, Allowed)); len(vs) != 0 {
			t.Errorf("%s: 10 in each of two windows: %v, want none", alg, vs)
		}
		vs := check(t, rules, ops("k", "r", 11, 100*time.Millisecond, 10*time.Millisecond, time.Millisecond, Allowed))
		if len(vs) != 1 || vs[0].Allowed != 11 || vs[0].Bound != 10 || !vs[0].From.Equal(t0) {
			t.Fatalf("%s: 11 in one window: %v, want 11 > 10 in the window at %v", alg, vs, t0)
		}
	}
}

func TestSlidingLogAllowsTheLimitInAnyPeriod(t *testing.T) {
	rules := map[string]Rule{"r": {Algorithm: SlidingLog, Limit: 10, Period: time.Second}}
	// 10, then 10 more a whole period after the first of them: correct.
	if vs := check(t, rules, ops("k", "r", 10, 0, 10*time.Millisecond, time.Millisecond, Allowed),
		ops("k", "r", 10, 1100*time.Millisecond, 10*time.Millisecond, time.Millisecond, Allowed)); len(vs) != 0 {
		t.Errorf("10 a period apart: %v, want none", vs)
	}
	// 10 at 0..90ms and 1 more at 600ms, across a window boundary that a
	// fixed window would allow.
	vs := check(t, rules, ops("k", "r", 10, 0, 10*time.Millisecond, time.Millisecond, Allowed),
		ops("k", "r", 1, 600*time.Millisecond, 0, time.Millisecond, Allowed))
	if len(vs) != 1 || vs[0].Allowed != 11 || vs[0].Bound != 10 {
		t.Fatalf("11 within 601ms: %v, want 11 > 10", vs)
	}
}

func TestOnlyDecidedAllowedHitsCount(t *testing.T) {
	rules := map[string]Rule{"r": {Algorithm: FixedWindow, Limit: 10, Period: time.Minute}}
	if vs := check(t, rules, ops("k", "r", 10, 0, time.Millisecond, time.Millisecond, Allowed),
		ops("k", "r", 5, 0, time.Millisecond, time.Millisecond, Policy),
		ops("k", "r", 5, 0, time.Millisecond, time.Millisecond, Denied),
		ops("k", "r", 5, 0, time.Millisecond, time.Millisecond, Error),
		ops("other", "r", 10, 0, time.Millisecond, time.Millisecond, Allowed)); len(vs) != 0 {
		t.Fatalf("10 allowed per key, the rest by policy, denied or failed: %v, want none", vs)
	}
}

func TestSoftAndElasticRaiseTheBound(t *testing.T) {
	rules := map[string]Rule{"r": {Algorithm: FixedWindow, Limit: 10, Period: time.Minute, SoftPercent: 20, ElasticPercent: 10}}
	h := ops("k", "r", 13, 0, time.Millisecond, time.Millisecond, Allowed)
	if vs := check(t, rules, h); len(vs) != 0 {
		t.Errorf("13 against 10 +20%% +10%%: %v, want none", vs)
	}
	vs := check(t, rules, h, ops("k", "r", 1, time.Second, 0, time.Millisecond, Allowed))
	if len(vs) != 1 || vs[0].Bound != 13 {
		t.Fatalf("14 against 13: %v, want one violation, bound 13", vs)
	}
}

func TestBadHistoryIsRefused(t *testing.T) {
	if _, err := Check(map[string]Rule{}, ops("k", "nope", 1, 0, 0, time.Millisecond, Allowed), nil); err == nil || !strings.Contains(err.Error(), `rule "nope" unknown`) {
		t.Errorf("unknown rule: %v", err)
	}
	back := ops("k", "r", 1, time.Second, 0, -time.Millisecond, Allowed)
	if _, err := Check(map[string]Rule{"r": {Algorithm: FixedWindow, Limit: 1, Period: time.Second}}, back, nil); err == nil || !strings.Contains(err.Error(), "before it was sent") {
		t.Errorf("answer before send: %v", err)
	}
}

func TestTallyAndReport(t *testing.T) {
	faults := []Fault{{Name: "cut shard-2", From: at(time.Second), To: at(2 * time.Second)}}
	h := append(ops("k", "r", 3, 0, 100*time.Millisecond, time.Millisecond, Allowed),
		ops("k", "r", 4, 1500*time.Millisecond, 10*time.Millisecond, time.Millisecond, Policy)...)
	tally := TallyByFault(h, faults)
	if tally[""][Allowed] != 3 || tally["cut shard-2"][Policy] != 4 {
		t.Fatalf("tally %v", tally)
	}
	rules := map[string]Rule{"r": {Algorithm: FixedWindow, Limit: 1, Period: time.Minute}}
	vs := check(t, rules, ops("k", "r", 2, 1100*time.Millisecond, time.Millisecond, time.Millisecond, Allowed))
	var b strings.Builder
	if err := Report(&b, 42, faults, vs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seed 42: 1 keys past their limit", "key k (rule r): 2 hits allowed", "fault in force: cut shard-2", "allowed hits=1 sent"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// A reset (a shard killed without a hand-off) allows each interval it may
// fall inside one more burst or window, and no more; an interval it does
// not meet gets nothing.
func TestResetsAllowOneMoreBurstOrWindowEach(t *testing.T) {
	reset := []Reset{{Name: "sigkill shard-1", From: at(40 * time.Millisecond), To: at(60 * time.Millisecond)}}
	bucket := map[string]Rule{"r": {Algorithm: TokenBucket, Limit: 60, Period: time.Minute, Burst: 5}}
	window := map[string]Rule{"r": {Algorithm: FixedWindow, Limit: 5, Period: time.Second}}
	log := map[string]Rule{"r": {Algorithm: SlidingLog, Limit: 5, Period: time.Second}}
	for name, rules := range map[string]map[string]Rule{"bucket": bucket, "window": window, "log": log} {
		// 10 in 100ms: 5 before the reset, 5 after: allowed with it.
		ten := ops("k", "r", 10, 0, 10*time.Millisecond, time.Millisecond, Allowed)
		vs, err := Check(rules, ten, reset)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 0 {
			t.Errorf("%s: 10 across one reset: %v, want none", name, vs)
		}
		// 11: one more than a reset allows; the violation says so.
		eleven := ops("k", "r", 11, 0, 9*time.Millisecond, time.Millisecond, Allowed)
		if vs, _ := Check(rules, eleven, reset); len(vs) != 1 || vs[0].Allowed != 11 || vs[0].Bound != 10 || vs[0].Resets != 1 {
			t.Errorf("%s: 11 across one reset: %v, want 11 > 10 with 1 reset", name, vs)
		}
		// The same 10 with the reset later, outside their interval (and
		// outside the window): no allowance.
		later := []Reset{{Name: "sigkill shard-1", From: at(1500 * time.Millisecond), To: at(1600 * time.Millisecond)}}
		if vs, _ := Check(rules, ten, later); len(vs) != 1 || vs[0].Resets != 0 {
			t.Errorf("%s: 10 with the reset after them: %v, want a violation with no reset allowed", name, vs)
		}
	}
}

// A limit lowered holds the checks after every router has it (its span's
// start) to the new limit, and the checks before to the old one: an
// interval that meets both spans gets the higher.
func TestLoweredLimitsHoldFromTheirSpan(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog} {
		// 10 per second until 1.2 s, 5 from 1.1 s (1.1–1.2 s: either).
		rules := map[string]Rule{"r": {Algorithm: alg, Limit: 10, Period: time.Second,
			Spans: []Span{{Limit: 10, To: at(1200 * time.Millisecond)}, {Limit: 5, From: at(1100 * time.Millisecond)}}}}
		// 10 in the first second: the old limit.
		first := ops("k", "r", 10, 0, 10*time.Millisecond, time.Millisecond, Allowed)
		if vs := check(t, rules, first); len(vs) != 0 {
			t.Errorf("%s: 10 under a limit of 10: %v, want none", alg, vs)
		}
		// 6 in the window from 2 s, under the new limit of 5.
		later := ops("k", "r", 6, 2100*time.Millisecond, 10*time.Millisecond, time.Millisecond, Allowed)
		if vs := check(t, rules, first, later); len(vs) != 1 || vs[0].Bound != 5 || vs[0].Allowed != 6 {
			t.Errorf("%s: 6 under a limit lowered to 5: %v, want 6 > 5", alg, vs)
		}
	}
	// A bucket: 5 then the old rate, then the new one.
	rules := map[string]Rule{"r": {Algorithm: TokenBucket, Limit: 60, Period: time.Minute, Burst: 5,
		Spans: []Span{{Limit: 60, To: at(10 * time.Second)}, {Limit: 6, From: at(9 * time.Second)}}}}
	// One a second for 10 s: the old rate allows it (5 + 10), the new
	// one (5 + 1) does not.
	if vs := check(t, rules, ops("k", "r", 11, 0, time.Second, time.Millisecond, Allowed)); len(vs) != 0 {
		t.Errorf("11 in 10 s at the old rate of 60 a minute: %v, want none", vs)
	}
	vs := check(t, rules, ops("k", "r", 11, 20*time.Second, time.Second, time.Millisecond, Allowed))
	if len(vs) != 1 || vs[0].Bound > 6 {
		t.Errorf("11 in 10 s at a rate lowered to 6 a minute (burst 5): %v, want a violation of a bound of at most 6", vs)
	}
}
