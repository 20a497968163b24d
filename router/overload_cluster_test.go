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
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// Saturation is not shard failure. A shard stalls (a paused proxy in front
// of it) with one call in flight; a request's checks wait for the next
// call; a second request finds the queue full and is shed at once, flagged
// overload and counted as such. Nothing of it reaches the shard's circuit:
// when the shard answers again, the call in flight and the checks that
// waited get its real answers, and so does the next request.
func TestOverloadedRouterShedsWithoutOpeningTheCircuit(t *testing.T) {
	const queued = 5
	proxy := clustertest.NewProxy(t)
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{
		Shards: 1,
		Rules:  []rules.Rule{{Service: "shop", Endpoint: "/checkout", Name: "checkout", Algorithm: "token_bucket", Limit: 1_000_000, Period: rules.Duration(time.Minute)}},
		Shard:  func(o *shard.Options) { o.Advertise = proxy.Addr() },
		Router: func(o *router.Options) {
			// Calls and waits that outlast the test: only the queue's
			// bound sheds here.
			o.CallsPerShard, o.MaxQueued = 1, queued
			o.Deadline, o.MaxQueueWait, o.BreakerFailures = 10*time.Second, 10*time.Second, 1
		},
	})
	proxy.SetTarget(c.Shards[0].Addr())
	cl, r := c.Client(0), c.Routers[0]
	ask := func(n int, user string) []*shardlimitv1.Decision {
		req := &shardlimitv1.CheckRequest{}
		for i := range n {
			req.Checks = append(req.Checks, &shardlimitv1.Check{Service: "shop", Endpoint: "/checkout", User: fmt.Sprint(user, i)})
		}
		resp, err := cl.Check(context.Background(), req)
		if err != nil {
			t.Error(err)
			return nil
		}
		return resp.Decisions
	}
	calls := func() float64 {
		return router.MetricValue(t, r.Registry(), "shardlimit_router_shard_call_checks", map[string]string{})
	}
	poll.Until(t, 10*time.Second, func() error {
		if d := ask(1, "warm")[0]; d.FailurePolicy {
			return fmt.Errorf("not decided by the shard yet: %v", d)
		}
		return nil
	})

	shardErrors := func() (n float64) {
		for _, reason := range []string{"circuit_open", "deadline", "error", "queued"} {
			n += counter(t, r, "shardlimit_router_shard_errors_total", map[string]string{"shard": c.Shards[0].ID(), "reason": reason})
		}
		return n
	}
	errorsBefore := shardErrors() // the warm-up may have failed while the shard was dialed

	proxy.Pause()
	before := calls()
	var wg sync.WaitGroup
	var stalled []*shardlimitv1.Decision
	wg.Go(func() { stalled = ask(1, "stalled") })
	poll.Until(t, 10*time.Second, func() error {
		if calls() == before {
			return fmt.Errorf("no call in flight yet")
		}
		return nil
	})
	// Two requests of `queued` checks: the first to arrive fills the queue
	// and waits, the other is shed at once.
	answers := make(chan []*shardlimitv1.Decision, 2)
	for _, user := range []string{"x", "y"} {
		wg.Go(func() { answers <- ask(queued, user) })
	}
	shed := <-answers
	for i, d := range shed {
		if !d.Allowed || !d.FailurePolicy || !d.Overload {
			t.Fatalf("shed check %d: %v; want allowed by policy, flagged overload", i, d)
		}
	}
	labels := map[string]string{"service": "shop", "endpoint": "/checkout", "rule": "checkout", "algorithm": "token_bucket", "result": "overload"}
	if n := router.MetricValue(t, r.Registry(), "shardlimit_router_decisions_total", labels); n != queued {
		t.Fatalf("overload counted %v, want %d", n, queued)
	}
	if n := shardErrors() - errorsBefore; n != 0 {
		t.Fatalf("%v shard errors; shedding is not the shard's failure", n)
	}

	proxy.Resume()
	waited := <-answers
	wg.Wait()
	for i, d := range append(stalled, waited...) {
		if !d.Allowed || d.FailurePolicy || d.Overload {
			t.Fatalf("check %d that waited for the shard: %v; want its answer", i, d)
		}
	}
	if d := ask(1, "after")[0]; d.FailurePolicy {
		t.Fatalf("after the stall: %v; the circuit must not have opened", d)
	}
}
