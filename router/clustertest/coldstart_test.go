package clustertest_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
)

// A cold start's joins gain partitions that hold no key at their owners:
// none waits the settle out under the hand-off lock (issue 27: 64 shards,
// one at a time, each 1.5s). With a settle of a minute, four shards (three
// joins that move partitions) start in less than one settle; waiting it
// out, they took three. The harness kills the shards at the end, so no
// drain waits it either.
func TestColdStartJoinsDoNotWaitTheSettle(t *testing.T) {
	rs, err := rules.Parse("cold.yaml", []byte("rules:\n  - {service: s, endpoint: /e, limit: 1, period: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	const settle = time.Minute
	start := time.Now()
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 4, Rules: rs,
		Shard: func(o *shard.Options) { o.HandoffSettle = settle }})
	if took := time.Since(start); took >= settle {
		t.Fatalf("4 shards started cold in %v: a join waited the settle (%v) with nothing to hand over", took, settle)
	}
	// And they decide: the limit of 1 holds, the second check is denied.
	for i, want := range []bool{true, false} {
		resp, err := c.Client(0).Check(context.Background(), &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "s", Endpoint: "/e", User: "u", Hits: proto.Int64(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		if d := resp.Decisions[0]; d.Allowed != want || d.FailurePolicy {
			t.Fatalf("check %d: allowed %v (by policy: %v), want %v by decision", i+1, d.Allowed, d.FailurePolicy, want)
		}
	}
}
