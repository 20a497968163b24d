package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// shortRules are one rule per algorithm, 2 per 2s (a hit every second:
// the tests below need two checks to come within a refill, which a loaded
// machine does in far less; the leaky bucket's 600ms max_delay leaves
// 400ms), a check that two rules apply to (per user and per IP), one of 1
// per hour, and one of 2 per 3s for waits.
func shortRules(t *testing.T) []rules.Rule {
	t.Helper()
	return parseRules(t, `
rules:
  - {service: w, endpoint: /token_bucket, algorithm: token_bucket, limit: 2, period: 2s}
  - {service: w, endpoint: /leaky_bucket, algorithm: leaky_bucket, limit: 2, period: 2s, burst: 3, max_delay: 600ms}
  - {service: w, endpoint: /fixed_window, algorithm: fixed_window, limit: 2, period: 2s}
  - {service: w, endpoint: /sliding_log, algorithm: sliding_log, limit: 2, period: 2s}
  - {service: w, endpoint: /sliding_window, algorithm: sliding_window, limit: 2, period: 2s}
  - {service: w, endpoint: /gcra, algorithm: gcra, limit: 2, period: 2s}
  - {service: w, endpoint: /two, name: per-user, limit: 2, period: 300ms}
  - {service: w, endpoint: /two, name: per-ip, key: [ip], algorithm: fixed_window, limit: 5, period: 1h}
  - {service: w, endpoint: /hour, limit: 1, period: 1h}
  - {service: w, endpoint: /wait, algorithm: token_bucket, limit: 2, period: 3s}
`)
}

// The RateLimit headers' promise, through a real router, for every
// algorithm: a caller told remaining 0 that waits NextAfter is allowed,
// and one denied that waits RetryAfter is allowed. The waits are real
// (the period is short); what is asserted is the answer after them, which
// waiting longer cannot change for a key nobody else uses.
func TestWaitingTheAdvertisedTimeIsEnough(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: shortRules(t)})
	cl := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: clusterTimeout})
	ctx := context.Background()
	for alg := limiter.TokenBucket; alg <= limiter.GCRA; alg++ {
		endpoint := "/" + alg.String()
		check := func(user string) Decision {
			t.Helper()
			d, err := cl.Check(ctx, "w", endpoint, user, 1)
			if err != nil || d.FromFailureMode || d.FailurePolicy {
				t.Fatalf("%s: %+v, %v", endpoint, d, err)
			}
			if d.Window != 2*time.Second || d.Limit < 2 || d.Rule != endpoint {
				t.Fatalf("%s: quota policy %q %d per %v", endpoint, d.Rule, d.Limit, d.Window)
			}
			return d
		}
		// Allowed down to remaining 0; then NextAfter is enough for one more.
		d := check("next")
		for d.Allowed && d.Remaining > 0 {
			d = check("next")
		}
		if !d.Allowed {
			t.Fatalf("%s: denied before remaining reached 0: %+v", endpoint, d)
		}
		if d.NextAfter <= 0 {
			t.Fatalf("%s: remaining 0 with no NextAfter: %+v", endpoint, d)
		}
		time.Sleep(d.NextAfter + d.Delay)
		if d := check("next"); !d.Allowed {
			t.Fatalf("%s: denied after waiting NextAfter: %+v", endpoint, d)
		}
		// Denied; then RetryAfter is enough.
		d = check("retry")
		for d.Allowed {
			d = check("retry")
		}
		if d.RetryAfter <= 0 {
			t.Fatalf("%s: denied with no RetryAfter: %+v", endpoint, d)
		}
		time.Sleep(d.RetryAfter)
		if d := check("retry"); !d.Allowed {
			t.Fatalf("%s: denied after waiting RetryAfter: %+v", endpoint, d)
		}
	}
}

// A check that two rules apply to carries both quota policies.
func TestSeveralRulesCarryEveryPolicy(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: shortRules(t)})
	cl := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: clusterTimeout})
	d, err := cl.CheckOne(context.Background(), Check{Service: "w", Endpoint: "/two", User: "u", IP: "10.0.0.1", Hits: 1})
	if err != nil {
		t.Fatal(err)
	}
	ps := d.Policies()
	if len(ps) != 2 || len(d.Quotas) != 2 {
		t.Fatalf("policies %+v", ps)
	}
	want := map[string]Quota{
		"per-user": {Rule: "per-user", Limit: 2, Window: 300 * time.Millisecond, Allowed: true, Remaining: 1},
		"per-ip":   {Rule: "per-ip", Limit: 5, Window: time.Hour, Allowed: true, Remaining: 4},
	}
	for _, q := range ps {
		w := want[q.Rule]
		if q.Limit != w.Limit || q.Window != w.Window || q.Allowed != w.Allowed || q.Remaining != w.Remaining || q.NextAfter <= 0 {
			t.Fatalf("%s: %+v, want %+v and a NextAfter", q.Rule, q, w)
		}
	}
}

// Wait sleeps through a denial and returns the allowed decision; it
// returns at once when the retry time is past the context's deadline, and
// for a check no wait can allow.
func TestWait(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: shortRules(t)})
	reg := prometheus.NewRegistry()
	cl := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: clusterTimeout, Registerer: reg})
	ctx := context.Background()
	chk := Check{Service: "w", Endpoint: "/wait", User: "waiter", Hits: 1}
	for i := range 5 {
		d, err := cl.Wait(ctx, chk)
		if err != nil || !d.Allowed {
			t.Fatalf("wait %d: %+v, %v", i, d, err)
		}
	}
	if got := clustertest.Metric(t, reg, "shardlimit_client_decisions_total", map[string]string{"result": "denied"}); got < 1 {
		t.Fatalf("5 waits at 2 per 3s saw %v denials, want some", got)
	}

	hour := Check{Service: "w", Endpoint: "/hour", User: "waiter", Hits: 1}
	if d, err := cl.Wait(ctx, hour); err != nil || !d.Allowed {
		t.Fatalf("first of 1 per hour: %+v, %v", d, err)
	}
	// 30 s: room for the check on a loaded machine, far below the wait.
	short, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := cl.Wait(short, hour)
	if !errors.Is(err, ErrWaitPastDeadline) || d.Allowed || d.RetryAfter < time.Minute {
		t.Fatalf("second of 1 per hour within 30s: %+v, %v; want ErrWaitPastDeadline at once", d, err)
	}
	if short.Err() != nil {
		t.Fatal("Wait slept until the deadline instead of returning at once")
	}

	if d, err := cl.Wait(ctx, Check{Service: "w", Endpoint: "/hour", User: "big", Hits: 2}); !errors.Is(err, ErrNeverAllowed) {
		t.Fatalf("2 hits of 1 per hour: %+v, %v; want ErrNeverAllowed", d, err)
	}
}
