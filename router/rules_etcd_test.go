package router_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// Rules applied through the admin API reach every router (how fast is
// logged, not asserted); an invalid file changes nothing; an invalid value
// written straight into etcd is ignored, its key counting as absent;
// changing only the limit keeps the counters; get round-trips; delete
// removes.
func TestRulesInEtcdHotReload(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Routers: 2, Router: func(o *router.Options) {
		o.Rules = nil // follow etcd
	}})
	adm := c.Admin(0)
	ctx := context.Background()
	apply := func(doc string) (*shardlimitv1.ApplyRulesResponse, error) {
		return adm.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{FileName: "r.yaml", Yaml: []byte(doc)})
	}
	waitRule := func(limit int64) {
		t.Helper()
		start := time.Now()
		for i := range c.Routers {
			cl := c.Client(i)
			poll.Until(t, 30*time.Second, func() error {
				resp, err := cl.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "pay", Endpoint: "/charge", User: "probe"}}})
				if err != nil {
					return fmt.Errorf("router %d: %v", i, err) // NotFound until the rule arrives
				}
				if d := resp.Decisions[0]; d.Limit != limit {
					return fmt.Errorf("router %d: limit %d, want %d", i, d.Limit, limit)
				}
				return nil
			})
		}
		// Measured, not asserted: a loaded machine delays etcd's watch.
		t.Logf("rules reached every router within %v", time.Since(start).Round(time.Millisecond))
	}

	resp, err := apply("rules:\n  - {service: pay, endpoint: /charge, name: charge, algorithm: fixed_window, limit: 5, period: 1h}\n")
	if err != nil || !resp.Applied || len(resp.Changes) != 1 || resp.Changes[0].Op != shardlimitv1.RuleChange_OP_ADD {
		t.Fatalf("apply: %v %v", resp, err)
	}
	waitRule(5)
	for range 3 {
		check(t, c.Client(0), "pay", "/charge", "alice")
	}

	// Only the limit changes: counters are kept (3 used of the new 10).
	if _, err := apply("rules:\n  - {service: pay, endpoint: /charge, name: charge, algorithm: fixed_window, limit: 10, period: 1h}\n"); err != nil {
		t.Fatal(err)
	}
	waitRule(10)
	if d := check(t, c.Client(1), "pay", "/charge", "alice"); d.Remaining != 6 {
		t.Fatalf("after the limit change: remaining %d, want 6 (counter kept)", d.Remaining)
	}

	// An invalid file changes nothing and names file, line and field.
	_, err = apply("rules:\n  - {service: pay, endpoint: /charge, name: charge, algorithm: fixed_window, limit: 20, period: 1h}\n  - {service: pay, endpoint: /x, limit: -1, period: 1h}\n")
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "r.yaml:3: invalid rule: limit:") {
		t.Fatalf("invalid file: %v", err)
	}
	if d := check(t, c.Client(0), "pay", "/charge", "bob"); d.Limit != 10 {
		t.Fatalf("an invalid file changed the rules: limit %d", d.Limit)
	}

	// A bad value straight in etcd is ignored as if the key were absent:
	// pay has no rule left on any router.
	cli, err := etcd.Dial([]string{c.Etcd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	key := etcd.Layout(c.Prefix).Rule("pay", "charge")
	if _, err := cli.Put(ctx, key, "service: pay\nendpoint: /charge\nname: charge\nlimit: nope\n"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() error {
		g, err := adm.GetRules(ctx, &shardlimitv1.GetRulesRequest{})
		if err != nil || len(g.Invalid) != 1 {
			return fmt.Errorf("invalid keys %v, err %v", g.GetInvalid(), err)
		}
		return nil
	})
	for i := range c.Routers {
		poll.Until(t, 30*time.Second, func() error {
			_, err := c.Client(i).Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "pay", Endpoint: "/charge", User: "bob"}}})
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("router %d with the only rule of pay invalid: %v, want NotFound", i, err)
			}
			return nil
		})
	}

	// get -o yaml round-trips through apply.
	if _, err := apply("rules:\n  - {service: pay, endpoint: /charge, name: charge, limit: 10, period: 1h, algorithm: gcra, burst: 2}\n"); err != nil {
		t.Fatal(err)
	}
	g, err := adm.GetRules(ctx, &shardlimitv1.GetRulesRequest{Service: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := adm.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{FileName: "got.yaml", Yaml: g.Yaml, DryRun: true})
	if err != nil || len(again.Changes) != 0 {
		t.Fatalf("get output does not round-trip: %v %v\n%s", again, err, g.Yaml)
	}

	// Dry run and prune.
	dry, err := adm.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{Yaml: []byte("rules:\n  - {service: pay, endpoint: /refund, limit: 1, period: 1m}\n"), DryRun: true, Prune: true})
	if err != nil || dry.Applied || len(dry.Changes) != 2 {
		t.Fatalf("dry run with prune: %v %v", dry, err)
	}
	if d := check(t, c.Client(0), "pay", "/charge", "bob"); d.Rule != "charge" {
		t.Fatalf("a dry run changed the rules: %v", d)
	}

	// Delete.
	del, err := adm.DeleteRule(ctx, &shardlimitv1.DeleteRuleRequest{Service: "pay", Name: "charge"})
	if err != nil || !del.Existed {
		t.Fatalf("delete: %v %v", del, err)
	}
	poll.Until(t, 30*time.Second, func() error {
		_, err := c.Client(1).Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "pay", Endpoint: "/charge", User: "x"}}})
		if status.Code(err) != codes.NotFound {
			return fmt.Errorf("after delete: %v", err)
		}
		return nil
	})
}

// Two routers, one started before a hand-written invalid value reached
// etcd and one after, decide with the same rules: the invalid key counts
// as absent on both, so the endpoint falls to the service's "*" rule
// everywhere (not 10/min on one router and 100/min on the other).
func TestRoutersAgreeOnAnInvalidStoredRule(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Router: func(o *router.Options) {
		o.Rules = nil // follow etcd
	}})
	ctx := context.Background()
	adm := c.Admin(0)
	if _, err := adm.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{Yaml: []byte(`rules:
  - {service: pay, endpoint: /charge, name: charge, algorithm: fixed_window, limit: 10, period: 366d}
  - {service: pay, endpoint: "*", algorithm: fixed_window, limit: 100, period: 366d}
`)}); err != nil {
		t.Fatal(err)
	}
	limitOf := func(i int) (string, int64, error) {
		resp, err := c.Client(i).Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "pay", Endpoint: "/charge", User: "probe", Hits: new(int64)}}})
		if err != nil {
			return "", 0, err
		}
		return resp.Decisions[0].Rule, resp.Decisions[0].Limit, nil
	}
	poll.Until(t, 30*time.Second, func() error {
		if rule, limit, err := limitOf(0); err != nil || limit != 10 {
			return fmt.Errorf("before: rule %s limit %d, %v", rule, limit, err)
		}
		return nil
	})
	cli, err := etcd.Dial([]string{c.Etcd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, etcd.Layout(c.Prefix).Rule("pay", "charge"), "service: pay\nendpoint: /charge\nname: charge\nlimit: 10\nperiod: forever\n"); err != nil {
		t.Fatal(err)
	}
	c.StartRouter() // started after the bad value
	for i := range c.Routers {
		poll.Until(t, 30*time.Second, func() error {
			if rule, limit, err := limitOf(i); err != nil || rule != "all" || limit != 100 {
				return fmt.Errorf("router %d: rule %q limit %d, %v; want the * rule's 100", i, rule, limit, err)
			}
			return nil
		})
	}
	// Both count on the same counter: the same decisions whichever router
	// is asked.
	for i := range 4 {
		if d := check(t, c.Client(i%2), "pay", "/charge", "alice"); d.Rule != "all" || d.Remaining != int64(99-i) {
			t.Fatalf("check %d on router %d: %v", i, i%2, d)
		}
	}
	g, err := adm.GetRules(ctx, &shardlimitv1.GetRulesRequest{Service: "pay"})
	if err != nil || len(g.Invalid) != 1 {
		t.Fatalf("GetRules: invalid %v, %v", g.GetInvalid(), err)
	}
}

// An apply that would leave a service, or all services, with more rules
// than the router's bounds is refused whole, naming the bound.
func TestApplyOverRuleBoundsIsRefused(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Router: func(o *router.Options) {
		o.Rules = nil
		o.RuleBounds = rules.Bounds{PerService: 3, Total: 5}
	}})
	ctx := context.Background()
	adm := c.Admin(0)
	doc := func(service string, n int) string {
		var b strings.Builder
		b.WriteString("rules:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {service: %s, endpoint: /e%d, limit: 1, period: 1m}\n", service, i)
		}
		return b.String()
	}
	apply := func(yaml string, prune bool) error {
		_, err := adm.ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{Yaml: []byte(yaml), Prune: prune})
		return err
	}
	if err := apply(doc("a", 4), false); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `service "a" would have 4 rules, over the maximum of 3 per service (--max-rules-per-service)`) {
		t.Fatalf("4 rules for one service: %v", err)
	}
	if err := apply(doc("a", 3), false); err != nil {
		t.Fatal(err)
	}
	if err := apply(doc("b", 3), false); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "6 rules would be stored, over the maximum of 5 in all (--max-rules)") {
		t.Fatalf("6 rules in all: %v", err)
	}
	g, err := adm.GetRules(ctx, &shardlimitv1.GetRulesRequest{})
	if err != nil || strings.Count(string(g.Yaml), "service:") != 3 {
		t.Fatalf("after refused applies: %v\n%s", err, g.GetYaml())
	}
	if err := apply(doc("b", 2), false); err != nil {
		t.Fatalf("5 rules in all: %v", err)
	}
}

// ListMembers and ListLimited fan out to the shards.
func TestAdminMembersAndLimited(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: testRules(t)})
	adm := c.Admin(0)
	cl := c.Client(0)
	for range 12 {
		check(t, cl, "shop", "/checkout", "eve")
	}
	ms, err := adm.ListMembers(context.Background(), &shardlimitv1.ListMembersRequest{})
	if err != nil || len(ms.Members) != 3 || ms.Partitions != 1024 {
		t.Fatalf("members: %v %v", ms, err)
	}
	total := uint32(0)
	for _, m := range ms.Members {
		if m.Stats == nil || m.ReadyUnixNs < m.StartedUnixNs || m.Partitions == 0 {
			t.Fatalf("member %v", m)
		}
		total += m.Partitions
	}
	if total != 1024 {
		t.Fatalf("members own %d partitions in all, want 1024", total)
	}
	// The shard saw one of eve's two denials: the router's over-limit cache
	// answered the other.
	lim, err := adm.ListLimited(context.Background(), &shardlimitv1.ListLimitedRequest{Service: "shop"})
	if err != nil || len(lim.Episodes) != 1 || lim.Episodes[0].User != "eve" || lim.Episodes[0].Denied != 1 {
		t.Fatalf("limited: %v %v", lim, err)
	}
}
