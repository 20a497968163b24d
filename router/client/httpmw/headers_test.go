package httpmw

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
)

func TestRateLimitFields(t *testing.T) {
	for _, c := range []struct {
		name           string
		d              client.Decision
		policy, status string
	}{
		{"allowed: t is when more quota comes, not the full reset", client.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 5500 * time.Millisecond, NextAfter: 500 * time.Millisecond, Window: time.Minute, Rule: "checkout"},
			`"checkout";q=10;w=60`, `"checkout";r=9;t=1`},
		{"allowed, last hit: t is when one more passes", client.Decision{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: time.Minute, NextAfter: 6 * time.Second, Window: time.Minute, Rule: "checkout"},
			`"checkout";q=10;w=60`, `"checkout";r=0;t=6`},
		{"denied: t is the retry time", client.Decision{Limit: 10, ResetAfter: time.Minute, RetryAfter: 5001 * time.Millisecond, NextAfter: 5001 * time.Millisecond, Window: time.Minute, Rule: "checkout"},
			`"checkout";q=10;w=60`, `"checkout";r=0;t=6`},
		{"full quota: t 0", client.Decision{Allowed: true, Limit: 100, Remaining: 100, Window: time.Hour, Rule: "default"},
			`"default";q=100;w=3600`, `"default";r=100;t=0`},
		{"window rounded up", client.Decision{Allowed: true, Limit: 5, Remaining: 4, NextAfter: time.Nanosecond, Window: 1500 * time.Millisecond, Rule: "r"},
			`"r";q=5;w=2`, `"r";r=4;t=1`},
		{"negative remaining (soft allowance) is 0", client.Decision{Allowed: true, SoftAllowanceUsed: true, Limit: 10, Remaining: -2, NextAfter: time.Second, Window: time.Second, Rule: "soft"},
			`"soft";q=10;w=1`, `"soft";r=0;t=1`},
		{"name escaped", client.Decision{Allowed: true, Limit: 1, Remaining: 1, Window: time.Second, Rule: `a"b\c` + "\u00e9"},
			`"a\"b\\c??";q=1;w=1`, `"a\"b\\c??";r=1;t=0`},
		{"huge durations in whole seconds, rounded up", client.Decision{Limit: 1, RetryAfter: 1 << 62, Window: time.Second, Rule: "x"},
			`"x";q=1;w=1`, `"x";r=0;t=4611686019`},
		{"several rules: one policy each, in order; shadow and failure policy left out", client.Decision{
			Limit: 10, Rule: "burst", RetryAfter: 2 * time.Second, Window: time.Second,
			Quotas: []client.Quota{
				{Rule: "burst", Limit: 10, Window: time.Second, RetryAfter: 2 * time.Second, NextAfter: 100 * time.Millisecond},
				{Rule: "daily", Limit: 1000, Window: 24 * time.Hour, Allowed: true, Remaining: 875, NextAfter: time.Hour, ResetAfter: 20 * time.Hour},
				{Rule: "trial", Limit: 5, Window: time.Minute, Allowed: true, Shadow: true, ShadowDenied: true},
				{Rule: "down", Limit: 5, Window: time.Minute, Allowed: true, FailurePolicy: true},
			},
		}, `"burst";q=10;w=1, "daily";q=1000;w=86400`, `"burst";r=0;t=2, "daily";r=875;t=3600`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			setRateLimitFields(h, c.d)
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
	for name, d := range map[string]client.Decision{
		"no rule":           {},
		"failure mode":      {FromFailureMode: true},
		"failure policy":    {Limit: 10, Rule: "r", FailurePolicy: true},
		"shadow":            {Allowed: true, Limit: 10, Rule: "r", Shadow: true, ShadowDenied: true},
		"limit but no rule": {Limit: 10},
	} {
		if qs := advertised(d); len(qs) != 0 {
			t.Errorf("%s: RateLimit fields would be sent: %v", name, qs)
		}
	}
	if qs := advertised(client.Decision{Limit: 10, Rule: "r"}); len(qs) != 1 {
		t.Error("a counter's decision: no RateLimit fields")
	}
}

func TestProblemDenied(t *testing.T) {
	for _, c := range []struct {
		name string
		d    client.Decision
		want string
	}{
		{"counter", client.Decision{Rule: "checkout", Limit: 1, RetryAfter: 5 * time.Second}, `"detail":"rate limit exceeded: retry in 5 s","violated-policies":["checkout"]}`},
		{"never", client.Decision{Rule: "checkout", Limit: 1, RetryAfter: client.RetryNever, NeverAllowed: true}, `"detail":"rate limit exceeded: this request costs more than the limit allows","violated-policies":["checkout"]}`},
		{"failure mode", client.Decision{FromFailureMode: true, RetryAfter: time.Second}, `"detail":"rate limiter unavailable, failing closed: retry in 1 s"}`},
	} {
		rec := httptest.NewRecorder()
		ProblemDenied(rec, nil, c.d)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %q", c.name, rec.Code, rec.Header().Get("Content-Type"))
		}
		if body := rec.Body.String(); !strings.HasPrefix(body, `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",`) || !strings.HasSuffix(body, c.want+"\n") {
			t.Errorf("%s: body %s, want ending %s", c.name, body, c.want)
		}
	}
}
