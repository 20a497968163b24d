package httpmw

import (
	"net/http"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
)

func TestRateLimitFields(t *testing.T) {
	for _, c := range []struct {
		name           string
		d              client.Decision
		window         time.Duration
		policy, status string
	}{
		{"allowed", client.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 5500 * time.Millisecond, Rule: "checkout"}, time.Minute,
			`"checkout";q=10;w=60`, `"checkout";r=9;t=6`},
		{"denied: t is the retry time", client.Decision{Limit: 10, ResetAfter: time.Minute, RetryAfter: 5001 * time.Millisecond, Rule: "checkout"}, time.Minute,
			`"checkout";q=10;w=60`, `"checkout";r=0;t=6`},
		{"no window known", client.Decision{Allowed: true, Limit: 100, Remaining: 100, Rule: "default"}, 0,
			`"default";q=100`, `"default";r=100;t=0`},
		{"window rounded up", client.Decision{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: time.Nanosecond, Rule: "r"}, 1500 * time.Millisecond,
			`"r";q=5;w=2`, `"r";r=4;t=1`},
		{"negative remaining (soft allowance) is 0", client.Decision{Allowed: true, SoftAllowanceUsed: true, Limit: 10, Remaining: -2, ResetAfter: time.Second, Rule: "soft"}, 0,
			`"soft";q=10`, `"soft";r=0;t=1`},
		{"name escaped", client.Decision{Allowed: true, Limit: 1, Remaining: 1, Rule: `a"b\c` + "\u00e9"}, 0,
			`"a\"b\\c??";q=1`, `"a\"b\\c??";r=1;t=0`},
		{"huge durations in whole seconds, rounded up", client.Decision{Limit: 1, RetryAfter: 1 << 62, Rule: "x"}, 0,
			`"x";q=1`, `"x";r=0;t=4611686019`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			setRateLimitFields(h, c.d, c.window)
			if got := h.Get("RateLimit-Policy"); got != c.policy {
				t.Errorf("RateLimit-Policy: %s, want %s", got, c.policy)
			}
			if got := h.Get("RateLimit"); got != c.status {
				t.Errorf("RateLimit: %s, want %s", got, c.status)
			}
		})
	}
}

func TestRetryAfterAndCounterPresence(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", time.Second: "1", 1001 * time.Millisecond: "2", 30 * time.Second: "30"} {
		if got := retryAfter(client.Decision{RetryAfter: d}); got != want {
			t.Errorf("retry after %v: %s, want %s", d, got, want)
		}
	}
	counter := client.Decision{Limit: 10, Rule: "r"}
	for name, d := range map[string]client.Decision{
		"no rule":           {},
		"failure mode":      {FromFailureMode: true},
		"failure policy":    {Limit: 10, Rule: "r", FailurePolicy: true},
		"shadow":            {Allowed: true, Limit: 10, Rule: "r", Shadow: true, ShadowDenied: true},
		"limit but no rule": {Limit: 10},
	} {
		if hasCounter(d) {
			t.Errorf("%s: RateLimit fields would be sent", name)
		}
	}
	if !hasCounter(counter) {
		t.Error("a counter's decision: no RateLimit fields")
	}
}
