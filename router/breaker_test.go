package router

import (
	"testing"
	"time"
)

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := &breaker{failures: 2, cooldown: time.Second}
	ms := time.Millisecond
	steps := []struct {
		at    time.Duration
		do    string // "allow" expects allowed, "probe" allowed as the probe, "refuse" refused; "fail" (a call sent at sent), "ok", "abandon" (the probe gave no verdict), "silent" (the shard failed its liveness check)
		sent  time.Duration
		label string
	}{
		{0, "allow", 0, "closed"},
		{1 * ms, "fail", 0, ""},
		{2 * ms, "allow", 0, "one failure keeps it closed"},
		{3 * ms, "fail", 2 * ms, ""},
		{3 * ms, "silent", 0, ""},
		{10 * ms, "refuse", 0, "open after two failures of a silent shard"},
		{999 * ms, "refuse", 0, "still cooling down"},
		{1003 * ms, "probe", 0, "first probe after cooldown"},
		{1003 * ms, "refuse", 0, "only one probe at a time"},
		{1004 * ms, "fail", 1003 * ms, ""},
		{1500 * ms, "refuse", 0, "failed probe reopens"},
		{2004 * ms, "probe", 0, "next probe"},
		{2005 * ms, "ok", 0, ""},
		{2005 * ms, "allow", 0, "closed after a good probe"},
		// One stall fails every call in flight: they count once.
		{2010 * ms, "fail", 2006 * ms, ""},
		{2011 * ms, "fail", 2006 * ms, ""},
		{2012 * ms, "fail", 2009 * ms, ""},
		{2013 * ms, "allow", 0, "calls in flight through one stall count as one failure"},
		{2020 * ms, "fail", 2013 * ms, ""},
		{2020 * ms, "silent", 0, ""},
		{2021 * ms, "refuse", 0, "a call sent after the first failed counts"},
		// The bug this guards against: a probe that gave no verdict
		// recorded nothing, and the circuit stayed half-open for good.
		{3020 * ms, "probe", 0, "probe after cooldown"},
		{3020 * ms, "abandon", 0, ""},
		{3020 * ms, "probe", 0, "an abandoned probe frees its slot at once"},
		{3020 * ms, "refuse", 0, "one probe at a time still"},
		{4019 * ms, "refuse", 0, "a probe in flight holds its slot up to a cooldown"},
		{4020 * ms, "probe", 0, "a probe that never reported is taken as lost"},
		{4020 * ms, "ok", 0, ""},
		{4020 * ms, "allow", 0, "closed"},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		switch s.do {
		case "fail":
			b.failure(t0.Add(s.sent), now)
		case "ok":
			b.success()
		case "abandon":
			b.abandon(true)
		case "silent":
			b.silence(now)
		default:
			if refusing := b.refusing(now); refusing != (s.do == "refuse") {
				t.Fatalf("step %d (%s): refusing = %v", i, s.label, refusing)
			}
			probe, ok := b.allow(now)
			if ok != (s.do != "refuse") || probe != (s.do == "probe") {
				t.Fatalf("step %d (%s): allow = %v, probe = %v", i, s.label, ok, probe)
			}
		}
	}
}

// The judgement of a shard whose calls fail (breaker): a run of failed
// calls opens the circuit only when the shard also fails its liveness
// check; a shard that answers it is alive, and its circuit stays closed
// however many calls miss. A fake clock: every time is given.
func TestBreakerOpensOnlyWhenTheShardFailsItsLivenessCheck(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := &breaker{failures: 3, cooldown: time.Second}
	ms := time.Millisecond
	steps := []struct {
		at    time.Duration
		do    string // "fail" (a call sent at sent), "ok", "alive", "silent", "abandon-check"; "allow", "refuse"
		sent  time.Duration
		want  string // "fail": "check" (the caller must check liveness), "open", ""; "alive", "silent": "open", "closed", ""
		label string
	}{
		// A shard late under load: calls miss, it answers the check.
		{30 * ms, "fail", 0, "check", "the first failure asks for a liveness check"},
		{60 * ms, "fail", 31 * ms, "", "one check at a time"},
		{90 * ms, "fail", 61 * ms, "", "three in a row, the check not answered yet: not open"},
		{91 * ms, "allow", 0, "", "closed while the check is out"},
		{100 * ms, "alive", 0, "", "the shard answered: alive"},
		{101 * ms, "allow", 0, "", "still closed"},
		{130 * ms, "fail", 101 * ms, "check", "a new run of failures checks again"},
		{160 * ms, "fail", 131 * ms, "", ""},
		{190 * ms, "fail", 161 * ms, "", ""},
		{220 * ms, "fail", 191 * ms, "", "four in a row, the check still out"},
		{230 * ms, "alive", 0, "", ""},
		{231 * ms, "allow", 0, "", "a late shard that answers its checks is never cut off"},
		// A shard that stops: the check goes unanswered.
		{260 * ms, "fail", 231 * ms, "check", ""},
		{290 * ms, "fail", 261 * ms, "", ""},
		{291 * ms, "allow", 0, "", "two failures: closed"},
		{510 * ms, "silent", 0, "", "silent, but only two failures: not open yet"},
		{511 * ms, "allow", 0, "", ""},
		{540 * ms, "fail", 511 * ms, "open", "the third failure of a silent shard opens it at once"},
		{541 * ms, "refuse", 0, "", "open"},
		{1540 * ms, "allow", 0, "probe", "the probe after the cooldown"},
		{1570 * ms, "fail", 1540 * ms, "open+check", "a failed probe opens it again, and checks liveness"},
		{1571 * ms, "refuse", 0, "", ""},
		{1800 * ms, "silent", 0, "", "still silent: stays open"},
		{1801 * ms, "refuse", 0, "", ""},
		{2570 * ms, "allow", 0, "probe", ""},
		{2600 * ms, "fail", 2570 * ms, "open+check", "a probe that was only late"},
		{2601 * ms, "refuse", 0, "", ""},
		{2610 * ms, "alive", 0, "closed", "the shard answered the check: the circuit closes"},
		{2611 * ms, "allow", 0, "", "closed"},
		{2612 * ms, "fail", 2611 * ms, "check", "a new run of failures"},
		{2613 * ms, "silent", 0, "", ""},
		{2614 * ms, "fail", 2613 * ms, "", ""},
		{2616 * ms, "fail", 2615 * ms, "open", "the third failure of a run known silent opens it, with no new check"},
		{3616 * ms, "allow", 0, "probe", ""},
		{3617 * ms, "ok", 0, "", "the shard is back"},
		{3618 * ms, "allow", 0, "", "closed"},
		// Three failures first, then the check's silence opens it.
		{3700 * ms, "fail", 3672 * ms, "check", ""},
		{3730 * ms, "fail", 3701 * ms, "", ""},
		{3760 * ms, "fail", 3731 * ms, "", ""},
		{3761 * ms, "allow", 0, "", "not open before the check's verdict"},
		{3950 * ms, "silent", 0, "open", "the check's silence opens it"},
		{3951 * ms, "refuse", 0, "", ""},
		{3960 * ms, "fail", 3761 * ms, "open", "a call in flight when it opened fails: open a cooldown more, no check (it was no probe)"},
		{4959 * ms, "refuse", 0, "", ""},
		{4960 * ms, "allow", 0, "probe", ""},
		{4961 * ms, "ok", 0, "", ""},
		// A verdict on a check sent before a call succeeded is out of date.
		{5000 * ms, "fail", 4951 * ms, "check", ""},
		{5001 * ms, "ok", 0, "", "a call succeeds while the check is out"},
		{5030 * ms, "fail", 5001 * ms, "", "the old check is still out: no second one"},
		{5250 * ms, "silent", 0, "", "out of date: it does not count"},
		{5280 * ms, "fail", 5031 * ms, "check", "the next failure checks again"},
		{5310 * ms, "fail", 5281 * ms, "", ""},
		{5311 * ms, "allow", 0, "", "closed: two failures, no verdict"},
		// A check that gave no verdict (the router stopping) frees the slot.
		{5312 * ms, "abandon-check", 0, "", ""},
		{5340 * ms, "fail", 5311 * ms, "check", "an abandoned check lets the next failure check"},
		{5341 * ms, "allow", 0, "", "three failures, the check out: closed"},
		// A check never reported is taken as lost after a cooldown.
		{6341 * ms, "fail", 5341 * ms, "check", "a check out for a cooldown is lost: check again"},
		{6342 * ms, "silent", 0, "open", "four failures and silent: open"},
		{6343 * ms, "refuse", 0, "", ""},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		got := ""
		switch s.do {
		case "fail":
			opened, check := b.failure(t0.Add(s.sent), now)
			switch {
			case opened && check:
				got = "open+check"
			case opened:
				got = "open"
			case check:
				got = "check"
			}
		case "ok":
			b.success()
		case "alive":
			if b.alive() {
				got = "closed"
			}
		case "silent":
			if b.silence(now) {
				got = "open"
			}
		case "abandon-check":
			b.abandonCheck()
		default:
			refusing := b.refusing(now)
			probe, ok := b.allow(now)
			switch {
			case refusing != !ok:
				t.Fatalf("step %d (%s): refusing = %v, allow = %v", i, s.label, refusing, ok)
			case !ok:
				got = "refuse"
			case probe:
				got = "probe"
			}
			if s.do == "refuse" {
				s.want = "refuse"
			}
		}
		if got != s.want {
			t.Fatalf("step %d at %v (%s %s): got %q, want %q", i, s.at, s.do, s.label, got, s.want)
		}
	}
}
