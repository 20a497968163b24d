package router

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/request"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/key/keytest"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// cacheRouter returns a router with only what fromCache and remember use,
// and its rules loaded into its over-limit cache.
func cacheRouter(t *testing.T, doc string) (*Router, *rules.Set) {
	t.Helper()
	o := newOverLimit(1024)
	r := &Router{overLimit: o, metrics: newMetrics(prometheus.NewRegistry(), o.cache)}
	return r, loadRules(t, r, doc)
}

func loadRules(t *testing.T, r *Router, doc string) *rules.Set {
	t.Helper()
	rs, err := rules.Parse("r.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	set := rules.NewSet(rs)
	r.overLimit.setRules(set)
	return set
}

const cacheRules = `rules:
  - {service: s, endpoint: /tb, name: tb, limit: 3, period: 1m}
  - {service: s, endpoint: /fw, name: fw, algorithm: fixed_window, limit: 3, period: 1m}
  - {service: s, endpoint: /shadow, name: shadow, limit: 3, period: 1m, shadow: true}
  - {service: s, endpoint: /elastic, name: elastic, limit: 3, period: 1m, elastic_percent: 50, elastic_load_percent: 50}
`

// resolved is a check of user under the rule of endpoint in set.
func resolved(set *rules.Set, endpoint, user string, hits int64) rules.Resolved {
	return rules.Resolved{Rule: set.Resolve("s", endpoint)[0], Service: "s", Endpoint: endpoint, User: user, Hits: hits}
}

// denial is a shard's denial with the waits given in ms.
func denial(limit, remaining int64, retry, reset int) *shardlimitv1.Decision {
	return &shardlimitv1.Decision{
		Limit: limit, Remaining: remaining,
		RetryAfter: durationpb.New(time.Duration(retry) * time.Millisecond),
		ResetAfter: durationpb.New(time.Duration(reset) * time.Millisecond),
		Delay:      durationpb.New(0),
	}
}

// Which shard answers the router holds, and what it answers from them, at
// explicit times.
func TestRouterHoldsExactDenialsOnly(t *testing.T) {
	const ms = int64(time.Millisecond)
	r, set := cacheRouter(t, cacheRules)
	policy := denial(3, 0, 1000, 1000)
	policy.FailurePolicy = true
	shadow := &shardlimitv1.Decision{Allowed: true, Shadow: true, ShadowDenied: true, Limit: 3}
	never := denial(3, 0, 0, 0)
	never.RetryAfter = durationpb.New(time.Duration(limiter.Never))
	for _, tc := range []struct {
		name string
		c    rules.Resolved
		d    *shardlimitv1.Decision
		held bool
	}{
		{"a shard's denial of 1 hit", resolved(set, "/tb", "a", 1), denial(3, 0, 1000, 5000), true},
		{"a denial of 2 hits of a bucket", resolved(set, "/tb", "b", 2), denial(3, 1, 1000, 5000), false},
		{"a denial of 2 hits of a fixed window", resolved(set, "/fw", "c", 2), denial(3, 1, 1000, 1000), true},
		{"an answer by failure policy", resolved(set, "/tb", "d", 1), policy, false},
		{"an allow", resolved(set, "/tb", "e", 1), &shardlimitv1.Decision{Allowed: true, Limit: 3}, false},
		{"a shadow rule's would-be denial", resolved(set, "/shadow", "f", 1), shadow, false},
		{"an elastic rule's denial", resolved(set, "/elastic", "g", 1), denial(3, 0, 1000, 1000), false},
		{"a denial without a wait", resolved(set, "/tb", "h", 1), denial(3, 0, 0, 0), false},
		{"a denial that can never be retried (hits over the limit)", resolved(set, "/tb", "i", 1), never, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := 10 * ms
			r.overLimit.record(&tc.c, tc.d, t0)
			got := r.overLimit.answer(&tc.c, t0+400*ms)
			if (got != nil) != tc.held {
				t.Fatalf("held %v, want %v", got, tc.held)
			}
			if got == nil {
				return
			}
			if got.Allowed || got.FailurePolicy || got.Rule != tc.c.Rule.Name || got.Limit != tc.d.Limit || got.Remaining != tc.d.Remaining ||
				got.RetryAfter.AsDuration() != tc.d.RetryAfter.AsDuration()-400*time.Millisecond ||
				got.ResetAfter.AsDuration() != tc.d.ResetAfter.AsDuration()-400*time.Millisecond {
				t.Fatalf("answered %v for %v 400ms later", got, tc.d)
			}
			// The rule's window, and when remaining grows: at the retry
			// time for 1 hit, when the window ends for more.
			next := tc.d.RetryAfter.AsDuration()
			if tc.c.Hits > 1 {
				next = tc.d.ResetAfter.AsDuration()
			}
			if got.Window.AsDuration() != time.Minute || got.NextAfter.AsDuration() != next-400*time.Millisecond {
				t.Fatalf("answered window %v, next after %v; want 1m, %v", got.Window.AsDuration(), got.NextAfter.AsDuration(), next-400*time.Millisecond)
			}
			if r.overLimit.answer(&tc.c, t0+tc.d.RetryAfter.AsDuration().Nanoseconds()) != nil {
				t.Fatal("still held at the retry time")
			}
		})
	}
}

// A new rule set keeps the entries of unchanged rules and sets aside those
// of changed ones; a check resolved under the old set is left alone.
func TestRuleChangesSetTheCacheAside(t *testing.T) {
	r, old := cacheRouter(t, cacheRules)
	tb, fw := resolved(old, "/tb", "a", 1), resolved(old, "/fw", "a", 1)
	r.overLimit.record(&tb, denial(3, 0, 1000, 1000), 1)
	r.overLimit.record(&fw, denial(3, 0, 1000, 1000), 1)
	next := loadRules(t, r, `rules:
  - {service: s, endpoint: /tb, name: tb, limit: 3, period: 1m}
  - {service: s, endpoint: /fw, name: fw, algorithm: fixed_window, limit: 10, period: 1m}
`)
	if r.overLimit.answer(&tb, 2) != nil {
		t.Error("a check resolved under the old set was answered")
	}
	tb, fw = resolved(next, "/tb", "a", 1), resolved(next, "/fw", "a", 1)
	if r.overLimit.answer(&tb, 2) == nil {
		t.Error("the unchanged rule's denial was set aside")
	}
	if r.overLimit.answer(&fw, 2) != nil {
		t.Error("the raised rule's denial is still used")
	}
}

// fromCache answers the held checks, counts them, and takes them out of the
// groups, wherever they were bound (an owner, or none); remember holds the
// shards' denials, and forgets the keys it refunds.
func TestFromCacheAndRemember(t *testing.T) {
	r, set := cacheRouter(t, cacheRules)
	checks := []rules.Resolved{
		resolved(set, "/tb", "held-0", 1), resolved(set, "/tb", "free", 1), resolved(set, "/tb", "held-1", 1), resolved(set, "/tb", "held-2", 1),
	}
	for _, i := range []int{0, 2, 3} {
		r.overLimit.record(&checks[i], denial(3, 0, 1000, 1000), 1)
	}
	out := make([]*shardlimitv1.Decision, len(checks))
	g := request.Groups{ByOwner: [][]int{{0, 1}, {2}}, None: []int{3}}
	r.fromCache(&ruleSet{Set: set}, checks, out, &g, false, 2)
	if len(g.ByOwner[0]) != 1 || g.ByOwner[0][0] != 1 || len(g.ByOwner[1]) != 0 || len(g.None) != 0 {
		t.Fatalf("groups left %+v, want only check 1", g)
	}
	if out[0] == nil || out[2] == nil || out[3] == nil || out[1] != nil {
		t.Fatalf("answers %v", out)
	}
	if n := value(t, r.metrics.overLimitHits.WithLabelValues("s")); n != 3 {
		t.Fatalf("hits %v, want 3", n)
	}
	if n := value(t, r.metrics.decisions.WithLabelValues("s", "/tb", "tb", "token_bucket", resultNames[resultDenied])); n != 3 {
		t.Fatalf("denied decisions %v, want 3", n)
	}

	// The shard denies check 1: held from then on.
	out[1] = denial(3, 0, 1000, 1000)
	r.remember(checks, out, &g, false, 2)
	if r.overLimit.answer(&checks[1], 3) == nil {
		t.Fatal("the shard's denial was not held")
	}
	// A refund of check 1's key forgets it.
	r.remember(checks, []*shardlimitv1.Decision{nil, {Allowed: true}, nil, nil}, &g, true, 4)
	if r.overLimit.answer(&checks[1], 5) != nil {
		t.Fatal("a refunded key is still held")
	}
	// Refunds are never answered from the cache.
	out = make([]*shardlimitv1.Decision, len(checks))
	g = request.Groups{ByOwner: [][]int{{0, 1, 2, 3}}}
	r.fromCache(&ruleSet{Set: set}, checks, out, &g, true, 5)
	if len(g.ByOwner[0]) != 4 || out[0] != nil {
		t.Fatal("a refund was answered from the cache")
	}
}

func TestOverLimitCacheOption(t *testing.T) {
	for _, tc := range []struct {
		entries int
		err     string
	}{
		{0, ""}, {-1, ""}, {8, ""}, {10_000_000, ""},
		{7, "over-limit cache: 7 entries not in 8..10000000 (negative turns it off)"},
		{10_000_001, "over-limit cache: 10000001 entries not in 8..10000000 (negative turns it off)"},
	} {
		o := Options{Config: component.Config{Etcd: []string{"x"}, TLS: &tls.Config{}, ShardTLS: &tls.Config{}}, OverLimitCache: tc.entries}
		o.fill()
		err := o.validate()
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%d entries: %v, want %q", tc.entries, err, tc.err)
		}
	}
	o := Options{}
	if o.fill(); o.OverLimitCache != 100_000 {
		t.Errorf("default %d entries, want 100000", o.OverLimitCache)
	}
	if newOverLimit(-1).cache != nil {
		t.Error("a negative size did not turn the cache off")
	}
}

// value returns a counter's value.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Two users whose key.Make collide (issue 23) keep denials of their own:
// the cache names counters by a hash under the router's secret seeds.
func TestCollidingUsersShareNoDenial(t *testing.T) {
	r, set := cacheRouter(t, cacheRules)
	victim, attacker := keytest.SameMake("s", "tb")
	if key.Make("s", "tb", victim) != key.Make("s", "tb", attacker) {
		t.Fatal("not a collision")
	}
	a, v := resolved(set, "/tb", attacker, 1), resolved(set, "/tb", victim, 1)
	r.overLimit.record(&a, denial(3, 0, 1000, 1000), 1)
	if r.overLimit.answer(&a, 2) == nil {
		t.Fatal("the attacker's denial is not held")
	}
	if got := r.overLimit.answer(&v, 2); got != nil {
		t.Fatalf("the victim was answered with the attacker's denial: %v", got)
	}
}
