package router

import (
	"testing"
	"time"
)

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := &breaker{failures: 2, cooldown: time.Second}
	steps := []struct {
		at    time.Duration
		do    string // "allow" expects allowed, "probe" allowed as the probe, "refuse" refused; "fail", "ok", "abandon" (the probe's caller gave up)
		label string
	}{
		{0, "allow", "closed"},
		{0, "fail", ""},
		{0, "allow", "one failure keeps it closed"},
		{0, "fail", ""},
		{10 * time.Millisecond, "refuse", "open after two failures"},
		{999 * time.Millisecond, "refuse", "still cooling down"},
		{time.Second, "probe", "first probe after cooldown"},
		{time.Second, "refuse", "only one probe at a time"},
		{time.Second, "fail", ""},
		{1500 * time.Millisecond, "refuse", "failed probe reopens"},
		{2 * time.Second, "probe", "next probe"},
		{2 * time.Second, "ok", ""},
		{2 * time.Second, "allow", "closed after a good probe"},
		{2 * time.Second, "allow", "closed after a good probe"},
		// The bug this guards against: a probe whose caller gave up
		// recorded nothing, and the circuit stayed half-open for good.
		{2 * time.Second, "fail", ""},
		{2 * time.Second, "fail", ""},
		{3 * time.Second, "probe", "probe after cooldown"},
		{3 * time.Second, "abandon", ""},
		{3 * time.Second, "probe", "an abandoned probe frees its slot at once"},
		{3 * time.Second, "refuse", "one probe at a time still"},
		{4*time.Second - time.Millisecond, "refuse", "a probe in flight holds its slot up to a cooldown"},
		{4 * time.Second, "probe", "a probe that never reported is taken as lost"},
		{4 * time.Second, "ok", ""},
		{4 * time.Second, "allow", "closed"},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		switch s.do {
		case "fail":
			b.failure(now)
		case "ok":
			b.success()
		case "abandon":
			b.abandon(true)
		default:
			probe, ok := b.allow(now)
			if ok != (s.do != "refuse") || probe != (s.do == "probe") {
				t.Fatalf("step %d (%s): allow = %v, probe = %v", i, s.label, ok, probe)
			}
		}
	}
}
