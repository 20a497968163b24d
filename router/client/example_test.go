package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// exampleRules are the rules of the examples' cluster.
const exampleRules = `
rules:
  - {service: shop, endpoint: /checkout, name: checkout, limit: 10, period: 1m}
  - {service: shop, endpoint: /search, name: search, limit: 2, period: 200ms}
`

// startCluster starts a real cluster (one shard, one router, mutual TLS)
// and a client of it; stop closes both.
func startCluster(name string, o client.Options) (c *client.Client, stop func()) {
	rs, err := rules.Parse("example.yaml", []byte(exampleRules))
	if err != nil {
		panic(err)
	}
	tb, done := clustertest.ExampleTB(name)
	cl := clustertest.New(tb, client.EtcdEndpoint(), clustertest.Options{Shards: 1, Rules: rs})
	// A generous timeout: examples run in make test, on a loaded machine.
	o.TLS, o.Routers, o.Timeout = cl.TLS(creds.OperatorID), []string{cl.Routers[0].Addr()}, 30*time.Second
	c, err = client.New(o)
	if err != nil {
		panic(err)
	}
	return c, func() { _ = c.Close(); done() }
}

// Check one call of a user: the decision carries the rule's quota policy
// (10 per minute) and when more quota comes.
func ExampleClient_Check() {
	c, stop := startCluster("ExampleClient_Check", client.Options{})
	defer stop()
	ctx := context.Background()

	d, err := c.Check(ctx, "shop", "/checkout", "alice", 1)
	if err != nil {
		panic(err) // bad input, unknown service, canceled ctx, closed client
	}
	fmt.Printf("allowed=%v rule=%s quota=%d per %v remaining=%d next in %v\n",
		d.Allowed, d.Rule, d.Limit, d.Window, d.Remaining, d.NextAfter)

	for range 9 {
		_, _ = c.Check(ctx, "shop", "/checkout", "alice", 1)
	}
	d, _ = c.Check(ctx, "shop", "/checkout", "alice", 1)
	fmt.Printf("allowed=%v remaining=%d retry within 6s: %v\n", d.Allowed, d.Remaining, d.RetryAfter > 0 && d.RetryAfter <= 6*time.Second)
	// Output:
	// allowed=true rule=checkout quota=10 per 1m0s remaining=9 next in 6s
	// allowed=false remaining=0 retry within 6s: true
}

// Wait instead of being denied, as with rate.Limiter.Wait: the search rule
// allows 2 per 200ms, and the third call waits for its turn.
func ExampleClient_Wait() {
	c, stop := startCluster("ExampleClient_Wait", client.Options{})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for i := range 3 {
		d, err := c.Wait(ctx, client.Check{Service: "shop", Endpoint: "/search", User: "bob", Hits: 1})
		fmt.Println(i, d.Allowed, err)
	}

	// A wait that would end past the deadline returns at once: carol used
	// her 10 per minute, her next check comes in 6s, the deadline in 3s.
	_, _ = c.Check(ctx, "shop", "/checkout", "carol", 10)
	short, cancel2 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel2()
	_, err := c.Wait(short, client.Check{Service: "shop", Endpoint: "/checkout", User: "carol", Hits: 1})
	fmt.Println(errors.Is(err, client.ErrWaitPastDeadline))
	// Output:
	// 0 true <nil>
	// 1 true <nil>
	// 2 true <nil>
	// true
}

// Batching: with BatchWindow set, concurrent Check calls share one RPC;
// CheckBatch sends several checks in one RPC explicitly.
func ExampleClient_CheckBatch() {
	c, stop := startCluster("ExampleClient_CheckBatch", client.Options{BatchWindow: time.Millisecond})
	defer stop()
	ctx := context.Background()

	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 15 {
		wg.Go(func() {
			d, err := c.Check(ctx, "shop", "/checkout", "dave", 1)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && d.Allowed {
				allowed++
			}
		})
	}
	wg.Wait()
	fmt.Println("concurrent checks allowed:", allowed)

	ds, err := c.CheckBatch(ctx, []client.Check{
		{Service: "shop", Endpoint: "/checkout", User: "erin", Hits: 3},
		{Service: "shop", Endpoint: "/checkout", User: "frank", Hits: 10},
		{Service: "shop", Endpoint: "/checkout", User: "dave", Hits: 1},
	})
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// concurrent checks allowed: 10
	// true 7
	// true 0
	// false 0
}

// A check that costs more than its rule ever allows is denied for good:
// NeverAllowed, RetryAfter is client.RetryNever, and the decision reads
// retry_after=never (in fmt and in slog), not 2562047h47m16s. Wait returns
// ErrNeverAllowed at once.
func ExampleDecision_neverAllowed() {
	c, stop := startCluster("ExampleDecision_neverAllowed", client.Options{})
	defer stop()
	ctx := context.Background()

	d, err := c.CheckOne(ctx, client.Check{Service: "shop", Endpoint: "/checkout", User: "gina", Hits: 11})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.NeverAllowed, d.RetryAfter == client.RetryNever)
	fmt.Println(d)
	_, err = c.Wait(ctx, client.Check{Service: "shop", Endpoint: "/checkout", User: "gina", Hits: 11})
	fmt.Println(errors.Is(err, client.ErrNeverAllowed))
	// Output:
	// true true
	// allowed=false rule=checkout limit=10 window=1m0s remaining=10 retry_after=never
	// true
}
