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
		do    string // "allow" expects allowed, "probe" allowed as the probe, "refuse" refused; "fail" (a call sent at sent), "ok", "abandon" (the probe gave no verdict)
		sent  time.Duration
		label string
	}{
		{0, "allow", 0, "closed"},
		{1 * ms, "fail", 0, ""},
		{2 * ms, "allow", 0, "one failure keeps it closed"},
		{3 * ms, "fail", 2 * ms, ""},
		{10 * ms, "refuse", 0, "open after two failures"},
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
