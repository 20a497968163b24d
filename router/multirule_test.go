package router_test

import (
	"context"
	"testing"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
)

// Two rules on one endpoint — 3 per user and 5 per IP — are both decided;
// when one denies, the hits the other took are given back, so a denied check
// consumes nothing.
func TestSeveralRulesDenyWithoutConsuming(t *testing.T) {
	rs, err := rules.Parse("multi.yaml", []byte(`
rules:
  - {service: api, endpoint: /login, name: per-user, limit: 3, period: 1h}
  - {service: api, endpoint: /login, name: per-ip, key: [ip], limit: 5, period: 1h}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: rs})
	cl := c.Client(0)
	login := func(user string) *shardlimitv1.Decision {
		t.Helper()
		resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{
			{Service: "api", Endpoint: "/login", User: user, Ip: "10.0.0.1"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Decisions[0]
	}
	for i := range 3 {
		if d := login("alice"); !d.Allowed || d.Rule != "per-user" || d.Remaining != int64(2-i) {
			t.Fatalf("alice %d: %v", i+1, d)
		}
	}
	// per-user denies; the IP's hit is given back.
	if d := login("alice"); d.Allowed || d.Rule != "per-user" {
		t.Fatalf("alice 4: %v", d)
	}
	// The IP has 2 of 5 left, not 1: bob gets exactly 2, then per-ip denies.
	for i := range 2 {
		if d := login("bob"); !d.Allowed {
			t.Fatalf("bob %d: %v", i+1, d)
		}
	}
	if d := login("bob"); d.Allowed || d.Rule != "per-ip" {
		t.Fatalf("bob 3: %v, want denied by per-ip", d)
	}
	// bob's own hit of that denied check was given back too: 1 left of 3.
	resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{
		{Service: "api", Endpoint: "/login", User: "bob", Ip: "10.0.0.2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; !d.Allowed || d.Rule != "per-user" || d.Remaining != 0 {
		t.Fatalf("bob from another IP: %v, want per-user allowed with 0 left", d)
	}
	// A rule with consume_on_deny keeps the hits of checks another rule denied.
	rs2, err := rules.Parse("multi2.yaml", []byte(`
rules:
  - {service: api, endpoint: /search, name: per-second, limit: 1, period: 1h}
  - {service: api, endpoint: /search, name: per-day, limit: 5, period: 1d, consume_on_deny: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	c2 := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: rs2})
	search := func() *shardlimitv1.Decision {
		resp, err := c2.Client(0).Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "api", Endpoint: "/search", User: "carol"}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Decisions[0]
	}
	search() // allowed: per-day 4 left
	search() // denied by per-second; per-day keeps the hit: 3 left
	if d := search(); d.Allowed || d.Rule != "per-second" {
		t.Fatalf("third search: %v", d)
	}
	// Read the per-day counter alone: 3 of 5 consumed, denied checks included.
	perDay := c2.Routers[0].Rules().Resolve("api", "/search")[1]
	day := c2.Routers[0].Decide(context.Background(), []rules.Resolved{{Rule: perDay, Service: "api", Endpoint: "/search", User: "carol"}})[0]
	if perDay.Name != "per-day" || day.Remaining != 2 {
		t.Fatalf("per-day after 1 allowed and 2 denied checks: %v, want 2 left", day)
	}
	// A check that no rule's key can be built for is rejected.
	_, err = cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "api", Endpoint: "/login", User: "x"}}})
	if err == nil {
		t.Fatal("check without ip accepted by a rule keyed by ip")
	}
}
