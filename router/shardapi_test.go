package router_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
)

// Checks through the router show up in the owner shard's Stats (load per
// partition, hottest keys) and Limited (the episode of a limited user), and
// Reset gives a user a fresh counter. The router's over-limit cache is off:
// it would answer the 12th check itself, unseen by the shard, and keep
// denying after the shard's Reset until the retry time (package overlimit).
func TestShardStatsLimitedAndReset(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t), Router: func(o *router.Options) {
		o.OverLimitCache = -1
	}})
	cl := c.Client(0)
	before := time.Now().UnixNano()
	for range 12 {
		check(t, cl, "shop", "/checkout", "mallory") // 10 allowed, 2 denied
	}
	check(t, cl, "shop", "/checkout", "bob")
	owner := c.Owner("shop", "checkout", "mallory")
	sc := shardlimitv1.NewShardClient(c.Internal(owner.Addr))
	ctx := context.Background()

	st, err := sc.Stats(ctx, &shardlimitv1.StatsRequest{TopKeys: 5})
	if err != nil {
		t.Fatal(err)
	}
	if st.Id != owner.ID || st.Load < 12 || st.Decisions < 12 || st.Keys < 1 || st.MemoryBytes == 0 || len(st.PartitionLoad) != 1024 {
		t.Fatalf("stats: id %s load %d decisions %d keys %d memory %d partitions %d", st.Id, st.Load, st.Decisions, st.Keys, st.MemoryBytes, len(st.PartitionLoad))
	}
	if len(st.HotKeys) == 0 || st.HotKeys[0].User != "mallory" || st.HotKeys[0].Count < 12 || st.HotKeys[0].Rule != "checkout" {
		t.Fatalf("hottest keys: %v", st.HotKeys)
	}

	lim, err := sc.Limited(ctx, &shardlimitv1.LimitedRequest{Service: "shop", SinceUnixNs: before})
	if err != nil {
		t.Fatal(err)
	}
	if len(lim.Episodes) != 1 {
		t.Fatalf("episodes: %v", lim.Episodes)
	}
	e := lim.Episodes[0]
	if e.User != "mallory" || e.Endpoint != "/checkout" || e.Rule != "checkout" || e.Denied != 2 || e.EndedUnixNs != 0 || e.BeganUnixNs < before {
		t.Fatalf("episode: %v", e)
	}
	if lim, _ := sc.Limited(ctx, &shardlimitv1.LimitedRequest{Service: "bank"}); len(lim.GetEpisodes()) != 0 {
		t.Fatalf("another service's episodes: %v", lim.Episodes)
	}

	rr, err := sc.Reset(ctx, &shardlimitv1.ResetRequest{Service: "shop", Rule: "checkout", User: "mallory"})
	if err != nil || !rr.Existed {
		t.Fatalf("reset: %v %v", rr, err)
	}
	if d := check(t, cl, "shop", "/checkout", "mallory"); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("after reset: %v", d)
	}
	lim, _ = sc.Limited(ctx, &shardlimitv1.LimitedRequest{Service: "shop"})
	if len(lim.Episodes) != 1 || lim.Episodes[0].EndedUnixNs == 0 {
		t.Fatalf("the reset did not end the episode: %v", lim.Episodes)
	}

	for _, tc := range []struct {
		call func() error
		want string
	}{
		{func() error { _, err := sc.Limited(ctx, &shardlimitv1.LimitedRequest{}); return err }, "service: required"},
		{func() error {
			_, err := sc.Limited(ctx, &shardlimitv1.LimitedRequest{Service: "shop", SinceUnixNs: 10, UntilUnixNs: 5})
			return err
		}, "until_unix_ns: before since_unix_ns"},
		{func() error { _, err := sc.Stats(ctx, &shardlimitv1.StatsRequest{TopKeys: 5000}); return err }, "top_keys: 5000 exceeds the maximum of 1000"},
		{func() error { _, err := sc.Reset(ctx, &shardlimitv1.ResetRequest{Service: "shop"}); return err }, "rule: required"},
	} {
		err := tc.call()
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != tc.want {
			t.Errorf("got %v, want InvalidArgument %q", err, tc.want)
		}
	}
}
