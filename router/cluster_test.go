package router_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

func testRules(t *testing.T) []rules.Rule {
	t.Helper()
	rs, err := rules.Parse("test.yaml", []byte(`
rules:
  - service: shop
    endpoint: /checkout
    name: checkout
    limit: 10
    period: 1m
  - service: shop
    endpoint: "*"
    limit: 5
    period: 1h
  - service: bank
    endpoint: /transfer
    limit: 5
    period: 1h
    failure_policy: deny
`))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func check(t *testing.T, c shardlimitv1.RateLimiterClient, service, endpoint, user string) *shardlimitv1.Decision {
	t.Helper()
	resp, err := c.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: service, Endpoint: endpoint, User: user}}})
	if err != nil {
		t.Fatalf("check %s %s %s: %v", service, endpoint, user, err)
	}
	return resp.Decisions[0]
}

// 200 concurrent checks for one user through two routers against a limit of
// 10 per minute allow exactly 10.
func TestExactLimitAcrossTwoRouters(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Routers: 2, Rules: testRules(t)})
	clients := []shardlimitv1.RateLimiterClient{c.Client(0), c.Client(1)}
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			d := check(t, clients[i%2], "shop", "/checkout", "alice")
			if d.FailurePolicy {
				t.Errorf("check %d decided by failure policy", i)
			}
			if d.Allowed {
				allowed.Add(1)
			} else {
				denied.Add(1)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 10 || denied.Load() != 190 {
		t.Fatalf("allowed %d, denied %d; want exactly 10 and 190", allowed.Load(), denied.Load())
	}
	d := check(t, clients[0], "shop", "/checkout", "alice")
	if d.Allowed || d.Remaining != 0 || d.RetryAfter.AsDuration() <= 0 || d.RetryAfter.AsDuration() > 6*time.Second || d.Rule != "checkout" {
		t.Fatalf("after the limit: %v", d)
	}
}

// Keys spread over all shards: each of 3 shards owns some of 1,000 users.
func TestKeysSpreadOverAllShards(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: testRules(t)})
	cl := c.Client(0)
	for u := 0; u < 1000; u += 100 {
		req := &shardlimitv1.CheckRequest{}
		for i := u; i < u+100; i++ {
			req.Checks = append(req.Checks, &shardlimitv1.Check{Service: "shop", Endpoint: "/checkout", User: fmt.Sprintf("user-%d", i)})
		}
		resp, err := cl.Check(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range resp.Decisions {
			if !d.Allowed || d.FailurePolicy || d.Remaining != 9 {
				t.Fatalf("user-%d: %v", u+i, d)
			}
		}
	}
	total := 0
	for _, s := range c.Shards {
		n := c.Keys(s)
		if n == 0 {
			t.Errorf("shard %s holds no keys", s.ID())
		}
		t.Logf("shard %s holds %d keys", s.ID(), n)
		total += n
	}
	if total != 1000 {
		t.Fatalf("shards hold %d keys in all, want 1000", total)
	}
}

// usersOf returns n users of (service, rule) whose counters shard id owns,
// and n that it does not own.
func usersOf(t *testing.T, c *clustertest.Cluster, service, rule, id string, n int) (own, other []string) {
	t.Helper()
	for i := 0; len(own) < n || len(other) < n; i++ {
		u := fmt.Sprintf("u%d", i)
		m := c.Owner(service, rule, u)
		if m.ID == id && len(own) < n {
			own = append(own, u)
		} else if m.ID != id && len(other) < n {
			other = append(other, u)
		}
	}
	return own, other
}

// A shard stopped abruptly: its users are answered by the failure policy,
// others are unaffected; once its lease expires its users are decided by
// the remaining shards, from zero; when it restarts it gets keys again.
// (How fast the policy answers come is measured by the fault suite, not
// asserted here: a loaded machine must not fail this test.)
func TestDeadShardFailsOpenThenMovesAndRejoins(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: testRules(t)})
	cl := c.Client(0)
	victim := c.Shards[1]
	own, other := usersOf(t, c, "shop", "checkout", victim.ID(), 5)
	for _, u := range append(own, other...) {
		for range 3 {
			check(t, cl, "shop", "/checkout", u)
		}
	}
	victim.Kill()

	for _, u := range own {
		d := check(t, cl, "shop", "/checkout", u)
		if !d.Allowed || !d.FailurePolicy {
			t.Errorf("user %s of the dead shard: %v, want allowed by failure policy", u, d)
		}
	}
	for _, u := range other {
		if d := check(t, cl, "shop", "/checkout", u); d.FailurePolicy || d.Remaining != 6 {
			t.Errorf("user %s of a live shard: %v, want remaining 6 from a shard", u, d)
		}
	}

	// The lease expires (revoked here, so that the checks above ran
	// before it, however slow the machine).
	c.RevokeLease(victim)
	c.WaitMembers(2)
	for _, u := range own {
		// The shard that gains the partition takes it over first (the
		// dead shard refuses the pull: from zero); until then checks
		// are answered by policy and count nothing.
		var d *shardlimitv1.Decision
		poll.Until(t, 10*time.Second, func() error {
			if d = check(t, cl, "shop", "/checkout", u); d.FailurePolicy {
				return fmt.Errorf("user %s still answered by policy: %v", u, d)
			}
			return nil
		})
		if !d.Allowed || d.Remaining != 9 {
			t.Errorf("user %s after the move: %v, want remaining 9 from a live shard, counting from zero", u, d)
		}
	}

	back := c.StartShard(victim.ID())
	c.WaitMembers(3)
	for _, u := range own {
		if m := c.Owner("shop", "checkout", u); m.ID != victim.ID() {
			t.Fatalf("user %s owned by %s after %s rejoined", u, m.ID, victim.ID())
		}
		check(t, cl, "shop", "/checkout", u)
	}
	if n := c.Keys(back); n != len(own) {
		t.Fatalf("rejoined shard holds %d keys, want %d", n, len(own))
	}
}

// A rule with failure policy deny denies while its owner is down.
func TestFailurePolicyDeny(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	cl := c.Client(0)
	victim := c.Shards[0]
	own, _ := usersOf(t, c, "bank", "/transfer", victim.ID(), 3)
	victim.Kill()
	for _, u := range own {
		d := check(t, cl, "bank", "/transfer", u)
		if d.Allowed || !d.FailurePolicy || d.RetryAfter.AsDuration() <= 0 {
			t.Errorf("user %s: %v, want denied by failure policy with a retry time", u, d)
		}
	}
	// The same users under an allow rule are let through.
	for _, u := range own {
		if m := c.Owner("shop", "checkout", u); m.ID == victim.ID() {
			if d := check(t, cl, "shop", "/checkout", u); !d.Allowed || !d.FailurePolicy {
				t.Errorf("user %s under an allow rule: %v", u, d)
			}
		}
	}
}

// Bad input is rejected with InvalidArgument naming the field and bound, and
// nothing of a rejected request is counted.
func TestBadInputIsRejectedAndNotCounted(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t), Router: func(o *router.Options) {
		o.MaxChecks = 50
	}})
	cl := c.Client(0)
	good := func() *shardlimitv1.Check {
		return &shardlimitv1.Check{Service: "shop", Endpoint: "/checkout", User: "bob"}
	}
	many := make([]*shardlimitv1.Check, 51)
	for i := range many {
		many[i] = good()
	}
	cases := []struct {
		name   string
		checks []*shardlimitv1.Check
		code   codes.Code
		want   string
	}{
		{"no checks", nil, codes.InvalidArgument, "checks: at least 1"},
		{"empty service", []*shardlimitv1.Check{good(), {Endpoint: "/checkout", User: "bob"}}, codes.InvalidArgument, "checks[1].service: required"},
		{"empty user", []*shardlimitv1.Check{good(), {Service: "shop", Endpoint: "/checkout"}}, codes.InvalidArgument, `checks[1].user: required by rule "checkout"`},
		{"negative hits", []*shardlimitv1.Check{good(), {Service: "shop", Endpoint: "/checkout", User: "bob", Hits: proto.Int64(-1)}}, codes.InvalidArgument, "checks[1].hits: -1 not in 0..1000000000"},
		{"too many checks", many, codes.InvalidArgument, "checks: 51 checks exceed the maximum of 50"},
		{"user too long", []*shardlimitv1.Check{good(), {Service: "shop", Endpoint: "/checkout", User: strings.Repeat("x", 257)}}, codes.InvalidArgument, "checks[1].user: length 257 exceeds the maximum of 256 bytes"},
		{"service too long", []*shardlimitv1.Check{good(), {Service: strings.Repeat("s", 129), Endpoint: "/checkout", User: "bob"}}, codes.InvalidArgument, "checks[1].service: length 129 exceeds the maximum of 128 bytes"},
		{"unknown service", []*shardlimitv1.Check{good(), {Service: "nope", Endpoint: "/x", User: "bob"}}, codes.NotFound, `checks[1].service: no rules for service "nope"`},
	}
	for _, tc := range cases {
		_, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: tc.checks})
		st, _ := status.FromError(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("%s: got %v %q, want %v containing %q", tc.name, st.Code(), st.Message(), tc.code, tc.want)
		}
	}
	// Invalid UTF-8, which a generated client will not even encode, sent
	// as raw bytes: InvalidArgument naming the field, not Internal.
	conn := c.Operator(c.Routers[0].Addr())
	goodCheck := rpctest.String(rpctest.String(rpctest.String(nil, 1, "shop"), 2, "/checkout"), 3, "bob")
	for field, bad := range map[string][]byte{
		"checks[1].user":     rpctest.String(rpctest.String(rpctest.String(nil, 1, "shop"), 2, "/checkout"), 3, "b\xc3\x28b"),
		"checks[1].endpoint": rpctest.String(rpctest.String(rpctest.String(nil, 1, "shop"), 2, "/\xffcheckout"), 3, "bob"),
		"checks[1].api_key":  rpctest.String(goodCheck, 5, "\xed\xa0\x80"),
	} {
		req := rpctest.Message(rpctest.Message(nil, 1, goodCheck), 1, bad)
		err := rpctest.Invoke(context.Background(), conn, shardlimitv1.RateLimiter_Check_FullMethodName, req)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != field+": invalid UTF-8" {
			t.Errorf("invalid UTF-8 in %s: %v", field, err)
		}
	}
	for _, s := range c.Shards {
		if n := c.Keys(s); n != 0 {
			t.Fatalf("shard %s holds %d keys after rejected requests", s.ID(), n)
		}
	}
	if d := check(t, cl, "shop", "/checkout", "bob"); d.Remaining != 9 {
		t.Fatalf("first accepted check: remaining %d, want 9", d.Remaining)
	}
}

// hits 0 reads without consuming, and an endpoint without a rule of its own
// falls to the service's "*" rule.
func TestReadOnlyHitsAndWildcard(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	cl := c.Client(0)
	resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{
		{Service: "shop", Endpoint: "/browse", User: "carol", Hits: proto.Int64(2)},
		{Service: "shop", Endpoint: "/search", User: "carol", Hits: proto.Int64(0)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := resp.Decisions[0], resp.Decisions[1]
	if !a.Allowed || a.Rule != "all" || a.Remaining != 3 || !b.Allowed || b.Rule != "all" || b.Remaining != 3 {
		t.Fatalf("got %v and %v", a, b)
	}
	_ = shard.Version
}
