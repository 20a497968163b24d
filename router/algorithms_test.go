package router_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
)

// Every algorithm and limit kind is selectable in a rule file and decided by
// the owner shard, end to end. Fixed and sliding windows are aligned on
// the epoch: theirs are 366 days long, so that no run crosses the turn of
// one (the next is 2027-02-13T00:00Z), as an hour's window would at every
// hour.
func TestEveryAlgorithmThroughTheRouter(t *testing.T) {
	rs, err := rules.Parse("algorithms.yaml", []byte(`
rules:
  - {service: alg, endpoint: /token, algorithm: token_bucket, limit: 3, period: 1h}
  - {service: alg, endpoint: /gcra, algorithm: gcra, limit: 3, period: 1h}
  - {service: alg, endpoint: /fixed, algorithm: fixed_window, limit: 3, period: 366d}
  - {service: alg, endpoint: /log, algorithm: sliding_log, limit: 3, period: 1h}
  - {service: alg, endpoint: /window, algorithm: sliding_window, limit: 3, period: 366d}
  - {service: alg, endpoint: /leaky, algorithm: leaky_bucket, limit: 3, period: 1h, burst: 3}
  - {service: kinds, endpoint: /queue, algorithm: leaky_bucket, limit: 3, period: 1h, burst: 3, max_delay: 20m}
  - {service: kinds, endpoint: /soft, algorithm: fixed_window, limit: 10, period: 366d, soft_percent: 20}
  - {service: kinds, endpoint: /shadow, algorithm: fixed_window, limit: 3, period: 366d, shadow: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: rs})
	cl := c.Client(0)

	for _, ep := range []string{"/token", "/gcra", "/fixed", "/log", "/window"} {
		for i := range 3 {
			if d := check(t, cl, "alg", ep, "u"); !d.Allowed || d.Remaining != int64(2-i) || d.Limit != 3 {
				t.Fatalf("%s hit %d: %v", ep, i+1, d)
			}
		}
		if d := check(t, cl, "alg", ep, "u"); d.Allowed || d.RetryAfter.AsDuration() <= 0 || d.FailurePolicy {
			t.Fatalf("%s hit 4: %v, want denied by the shard with a retry time", ep, d)
		}
	}
	// Leaky bucket: a queue of 3 draining one every 20 minutes; each
	// request that fits is allowed with its wait in the queue.
	for i := range 3 {
		if d := check(t, cl, "alg", "/leaky", "u"); !d.Allowed || d.Delay.AsDuration() > time.Duration(i)*20*time.Minute || d.Delay.AsDuration() <= time.Duration(i)*20*time.Minute-time.Minute {
			t.Fatalf("/leaky request %d: %v, want allowed with a delay of %d×20m", i+1, d, i)
		}
	}
	if d := check(t, cl, "alg", "/leaky", "u"); d.Allowed || d.RetryAfter.AsDuration() <= 0 || d.FailurePolicy {
		t.Fatalf("/leaky request 4: %v, want denied by the shard: the queue is full", d)
	}
	// Leaky bucket with max_delay 20m: the third would wait 40 minutes.
	for i := range 2 {
		if d := check(t, cl, "kinds", "/queue", "u"); !d.Allowed {
			t.Fatalf("/queue request %d: %v, want allowed", i+1, d)
		}
	}
	if d := check(t, cl, "kinds", "/queue", "u"); d.Allowed || d.Delay.AsDuration() <= 20*time.Minute {
		t.Fatalf("/queue request 3: %v, want denied with the wait it would have had", d)
	}
	// Soft: 20% over 10 is allowed and says so.
	resp, err := cl.Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{
		{Service: "kinds", Endpoint: "/soft", User: "u", Hits: proto.Int64(10)},
		{Service: "kinds", Endpoint: "/soft", User: "v", Hits: proto.Int64(1)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; !d.Allowed || d.SoftAllowanceUsed {
		t.Fatalf("/soft at the limit: %v", d)
	}
	if d := check(t, cl, "kinds", "/soft", "u"); !d.Allowed || !d.SoftAllowanceUsed {
		t.Fatalf("/soft over the limit: %v, want allowed with the allowance used", d)
	}
	check(t, cl, "kinds", "/soft", "u")
	if d := check(t, cl, "kinds", "/soft", "u"); d.Allowed {
		t.Fatalf("/soft past the allowance: %v", d)
	}
	// Shadow: never denies, says when it would have.
	for i := range 5 {
		d := check(t, cl, "kinds", "/shadow", "u")
		if !d.Allowed || !d.Shadow || d.ShadowDenied != (i >= 3) {
			t.Fatalf("/shadow hit %d: %v", i+1, d)
		}
	}
}
