package router_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// decisionsOf returns the decisions shards have made in all, from their
// Stats API.
func decisionsOf(t *testing.T, c *clustertest.Cluster, shards ...*shard.Server) uint64 {
	t.Helper()
	n := uint64(0)
	for _, s := range shards {
		st, err := c.ShardClient(s).Stats(context.Background(), &shardlimitv1.StatsRequest{})
		if err != nil {
			t.Fatalf("stats of %s: %v", s.ID(), err)
		}
		n += st.Decisions
	}
	return n
}

// The over-limit cache, end to end: a flooding user is denied by the
// router with the shard's own figures, and its shard sees one decision for
// the whole flood; the user stays denied, not answered by failure policy,
// while that shard is down and after its partitions restart from zero
// elsewhere; and a rule change (a raised limit) sets the cache aside at
// once. The rule's sliding window is 366 days: windows are aligned on the
// epoch, and an hour's would turn at the hour and let mallory through.
func TestOverLimitCache(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Router: func(o *router.Options) {
		o.Rules = nil // follow etcd, so the rule can change
	}})
	cl, rt := c.Client(0), c.Routers[0]
	ctx := context.Background()
	apply := func(limit int) {
		t.Helper()
		doc := fmt.Sprintf("rules:\n  - {service: flood, endpoint: /api, name: api, algorithm: sliding_window, limit: %d, period: 366d}\n", limit)
		if _, err := c.Admin(0).ApplyRules(ctx, &shardlimitv1.ApplyRulesRequest{FileName: "r.yaml", Yaml: []byte(doc)}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 10*time.Second, func() error {
			resp, err := cl.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "flood", Endpoint: "/api", User: "probe"}}})
			if err != nil {
				return err
			}
			if got := resp.Decisions[0].Limit; got != int64(limit) {
				return fmt.Errorf("limit %d, want %d", got, limit)
			}
			return nil
		})
	}
	ask := func(user string) *shardlimitv1.Decision { return check(t, cl, "flood", "/api", user) }
	hits := func() float64 {
		return counter(t, rt, "shardlimit_router_overlimit_cache_hits_total", map[string]string{"service": "flood"})
	}
	// same says whether d is first again, as the shard would give it later:
	// the same limit and remaining, the waits no longer.
	same := func(d, first *shardlimitv1.Decision) bool {
		return !d.Allowed && !d.FailurePolicy && d.Rule == first.Rule && d.Limit == first.Limit && d.Remaining == first.Remaining &&
			d.RetryAfter.AsDuration() > 0 && d.RetryAfter.AsDuration() <= first.RetryAfter.AsDuration() &&
			d.ResetAfter.AsDuration() <= first.ResetAfter.AsDuration()
	}
	apply(3)

	// A flood: after 3 allowed checks, one denial comes from the shard, and
	// 200 concurrent checks get it from the router.
	for range 3 {
		if d := ask("mallory"); !d.Allowed {
			t.Fatalf("mallory under her limit: %v", d)
		}
	}
	before := decisionsOf(t, c, c.Shards...)
	first := ask("mallory")
	if first.Allowed || first.FailurePolicy || first.Remaining != 0 || first.RetryAfter.AsDuration() <= 0 {
		t.Fatalf("mallory over her limit: %v, want denied by her shard", first)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wrong []*shardlimitv1.Decision
	for range 4 {
		wg.Go(func() {
			for range 50 {
				d := check(t, cl, "flood", "/api", "mallory")
				if !same(d, first) {
					mu.Lock()
					wrong = append(wrong, d)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d of 200 flooding checks not answered as the shard's %v; first: %v", len(wrong), first, wrong[0])
	}
	if n := decisionsOf(t, c, c.Shards...) - before; n != 1 {
		t.Errorf("the shards decided %d of mallory's 201 denied checks, want 1", n)
	}
	if got := hits(); got != 200 {
		t.Errorf("over-limit cache hits %v, want 200", got)
	}
	if got := counter(t, rt, "shardlimit_router_decisions_total", map[string]string{"service": "flood", "endpoint": "/api", "rule": "api", "algorithm": "sliding_window", "result": "denied"}); got != 201 {
		t.Errorf("denied decisions %v, want 201 (the cache's included)", got)
	}

	// Mallory's shard dies. A user of it under the limit is answered by
	// failure policy; mallory stays denied by the cache, before and after
	// her partition moves to a live shard that counts from zero.
	owner := c.Owner("flood", "api", "mallory")
	neighbours, _ := usersOf(t, c, "flood", "api", owner.ID, 1)
	var dead *shard.Server
	var live []*shard.Server
	for _, s := range c.Shards {
		if s.ID() == owner.ID {
			dead = s
		} else {
			live = append(live, s)
		}
	}
	dead.Kill()
	if d := ask(neighbours[0]); !d.FailurePolicy {
		t.Fatalf("a user of the dead shard: %v, want an answer by failure policy", d)
	}
	if d := ask("mallory"); !same(d, first) {
		t.Fatalf("mallory while her shard is down: %v, want %v from the cache", d, first)
	}
	c.RevokeLease(dead) // its lease expires, after the checks above
	c.WaitMembers(2)
	before = decisionsOf(t, c, live...)
	for range 10 {
		if d := ask("mallory"); !same(d, first) {
			t.Fatalf("mallory after her partition moved: %v, want %v from the cache", d, first)
		}
	}
	if n := decisionsOf(t, c, live...) - before; n != 0 {
		t.Errorf("the live shards decided %d of mallory's checks, want 0", n)
	}

	// A user over the limit on a live shard (every shard is, now), held by
	// the cache; then the limit is raised, and that user is allowed at once,
	// by the shard, with the counter it kept.
	alice := "alice"
	for range 3 {
		ask(alice)
	}
	if d := ask(alice); d.Allowed || d.FailurePolicy {
		t.Fatalf("%s over the limit: %v", alice, d)
	}
	held := hits()
	if d := ask(alice); d.Allowed || hits() != held+1 {
		t.Fatalf("%s not held by the cache: %v", alice, d)
	}
	apply(10)
	if d := ask(alice); !d.Allowed || d.FailurePolicy || d.Limit != 10 || d.Remaining != 6 {
		t.Fatalf("%s after the limit was raised to 10: %v, want allowed by her shard with 6 left", alice, d)
	}
	// Her new shard answers once it has taken her partition over from the
	// dead one (until then, by policy, which counts nothing).
	var d *shardlimitv1.Decision
	poll.Until(t, 10*time.Second, func() error {
		if d = ask("mallory"); d.FailurePolicy {
			return fmt.Errorf("mallory answered by policy: her partition is being taken over")
		}
		return nil
	})
	if !d.Allowed || d.Remaining != 9 {
		t.Fatalf("mallory after the limit was raised: %v, want allowed by her new shard, counting from zero", d)
	}
	if got := hits(); got != held+1 {
		t.Errorf("the cache answered %v checks after the rule changed", got-held-1)
	}
}

// With the cache off, every check reaches the shard.
func TestOverLimitCacheOff(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t), Router: func(o *router.Options) {
		o.OverLimitCache = -1
	}})
	cl := c.Client(0)
	before := decisionsOf(t, c, c.Shards...)
	for i := range 20 {
		if d := check(t, cl, "shop", "/checkout", "mallory"); d.Allowed != (i < 10) || d.FailurePolicy {
			t.Fatalf("check %d: %v", i, d)
		}
	}
	if n := decisionsOf(t, c, c.Shards...) - before; n != 20 {
		t.Fatalf("the shard decided %d of 20 checks, want 20", n)
	}
	if got := counter(t, c.Routers[0], "shardlimit_router_overlimit_cache_hits_total", map[string]string{"service": "shop"}); got != 0 {
		t.Fatalf("a disabled cache answered %v checks", got)
	}
}
