package clustertest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
)

// Issue 22: a leaky_bucket rule of 10 per 2s with the defaults is a queue
// of 10 draining one request every 200ms. 40 concurrent checks for one
// user over two routers are all decided by the shard; those that fit in
// the queue are allowed, each with its wait in the queue as delay, and the
// others denied with the time until one fits (it allowed 1 before).
//
// Exactly 10 fit when the 40 reach the shard within 200ms of the first.
// A loaded machine may spread them wider, and each 200ms of spread drains
// one more place, so the test holds 10 + drained: allowed is at least 10
// (a denial means the queue held 10) and at most 10 plus the 200ms steps
// between the first send and the last answer. The delays say the same
// from the shard's side: the allowed requests' delays are distinct and
// under the queue's 2s drain time.
func TestLeakyBucketAdmitsItsQueue(t *testing.T) {
	rs, err := rules.Parse("leaky.yaml", []byte(`rules:
  - {service: shop, endpoint: /queue, algorithm: leaky_bucket, limit: 10, period: 2s}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Routers: 2, Rules: rs})
	clients := []shardlimitv1.RateLimiterClient{c.Client(0), c.Client(1)}
	const n, capacity, drainStep = 40, 10, 200 * time.Millisecond

	check := func(cl shardlimitv1.RateLimiterClient, user string) (*shardlimitv1.Decision, error) {
		resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/queue", User: user}}})
		if err != nil {
			return nil, err
		}
		return resp.Decisions[0], nil
	}
	// Connections and streams up first, so that the 40 arrive together.
	for _, cl := range clients {
		for _, u := range []string{"warm-1", "warm-2", "warm-3"} {
			if _, err := check(cl, u); err != nil {
				t.Fatal(err)
			}
		}
	}

	decisions := make([]*shardlimitv1.Decision, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, err := check(clients[i%2], "alice")
			if err != nil {
				t.Errorf("check %d: %v", i, err)
			}
			decisions[i] = d
		})
	}
	wg.Wait()
	spread := time.Since(start)
	if t.Failed() {
		t.FailNow()
	}

	allowed, delays := 0, map[time.Duration]bool{}
	for i, d := range decisions {
		if d.FailurePolicy {
			t.Fatalf("check %d answered by failure policy: %v", i, d)
		}
		if !d.Allowed {
			if r := d.RetryAfter.AsDuration(); r <= 0 || r > drainStep {
				t.Errorf("check %d denied with retry_after %v, want in (0, %v]: the queue drains one every %v", i, r, drainStep, drainStep)
			}
			continue
		}
		allowed++
		delay := d.Delay.AsDuration()
		if delay < 0 || delay > (capacity-1)*drainStep || delays[delay] {
			t.Errorf("check %d allowed with delay %v: want distinct delays in 0..%v", i, delay, (capacity-1)*drainStep)
		}
		delays[delay] = true
	}
	most := capacity + int(spread/drainStep)
	if allowed < capacity || allowed > most {
		t.Fatalf("%d of %d checks allowed in %v; want the queue's %d (at most %d, the queue having drained for %v)", allowed, n, spread, capacity, most, spread)
	}
	t.Logf("%d of %d allowed in %v", allowed, n, spread)
}
