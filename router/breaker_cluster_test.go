package router_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// A probe whose caller gave up before the shard answered must free the
// circuit's probe slot. Before the fix it recorded nothing: the circuit
// stayed half-open, and every later check was answered by failure policy
// while the shard was healthy, until the router restarted. This is the
// issue's reproduction: a stalled shard (here, a paused proxy in front of
// it) opens the circuit, one check with a 10ms client deadline is the probe,
// then the shard answers again.
func TestBreakerProbeWhoseCallerGaveUpFreesTheSlot(t *testing.T) {
	const cooldown = 300 * time.Millisecond
	proxy := clustertest.NewProxy(t)
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{
		Shards: 1,
		Rules:  []rules.Rule{{Service: "shop", Endpoint: "/checkout", Name: "checkout", Limit: 1_000_000, Period: rules.Duration(time.Minute)}},
		Shard:  func(o *shard.Options) { o.Advertise = proxy.Addr() },
		Router: func(o *router.Options) {
			o.Deadline, o.BreakerFailures, o.BreakerCooldown = 100*time.Millisecond, 3, cooldown
		},
	})
	proxy.SetTarget(c.Shards[0].Addr())
	cl := c.Client(0)
	ask := func(ctx context.Context, user string) (*shardlimitv1.Decision, error) {
		resp, err := cl.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: user}}})
		if err != nil {
			return nil, err
		}
		return resp.Decisions[0], nil
	}
	refused := func() float64 {
		return counter(t, c.Routers[0], "shardlimit_router_shard_errors_total", map[string]string{"shard": c.Shards[0].ID(), "reason": "circuit_open"})
	}
	poll.Until(t, 10*time.Second, func() error {
		d, err := ask(context.Background(), "warm")
		if err != nil || d.FailurePolicy {
			return fmt.Errorf("not decided by the shard yet: %v %v", d, err)
		}
		return nil
	})

	proxy.Pause()
	var opened time.Time
	for i := range 3 {
		if d, err := ask(context.Background(), fmt.Sprint("u", i)); err != nil || !d.FailurePolicy {
			t.Fatalf("check %d to a stalled shard: %v %v; want an answer by policy", i, d, err)
		}
		opened = time.Now()
	}
	// The circuit is open for the cooldown; the first call after it is the
	// probe. Give it a caller that gives up at once, until one such call
	// was let through as the probe rather than refused by the circuit.
	time.Sleep(time.Until(opened.Add(cooldown))) // the breaker's own clock: nothing to poll
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no call was let through as the probe in 10s")
		}
		before := refused()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, _ = ask(ctx, "impatient")
		cancel()
		if refused() == before {
			break
		}
	}
	proxy.Resume()
	resumed := time.Now()
	poll.Until(t, 10*time.Second, func() error {
		d, err := ask(context.Background(), "after")
		if err != nil || d.FailurePolicy {
			return fmt.Errorf("still answered by policy after the shard came back: %v %v", d, err)
		}
		return nil
	})
	t.Logf("decided by the shard again %v after it answered (cooldown %v)", time.Since(resumed).Round(time.Millisecond), cooldown)
}

// counter returns the value of the counter name with exactly labels in
// r's registry; 0 when it has not been counted yet.
func counter(t *testing.T, r *router.Router, name string, labels map[string]string) float64 {
	t.Helper()
	return router.MetricValue(t, r.Registry(), name, labels)
}
