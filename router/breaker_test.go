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
		do    string // "allow" expects allowed, "refuse" expects refused, "fail", "ok"
		label string
	}{
		{0, "allow", "closed"},
		{0, "fail", ""},
		{0, "allow", "one failure keeps it closed"},
		{0, "fail", ""},
		{10 * time.Millisecond, "refuse", "open after two failures"},
		{999 * time.Millisecond, "refuse", "still cooling down"},
		{time.Second, "allow", "first probe after cooldown"},
		{time.Second, "refuse", "only one probe at a time"},
		{time.Second, "fail", ""},
		{1500 * time.Millisecond, "refuse", "failed probe reopens"},
		{2 * time.Second, "allow", "next probe"},
		{2 * time.Second, "ok", ""},
		{2 * time.Second, "allow", "closed after a good probe"},
		{2 * time.Second, "allow", "closed after a good probe"},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		switch s.do {
		case "fail":
			b.failure(now)
		case "ok":
			b.success()
		default:
			if got := b.allow(now); got != (s.do == "allow") {
				t.Fatalf("step %d (%s): allow = %v", i, s.label, got)
			}
		}
	}
}
