package etcd

import "testing"

// The layout is a storage contract: a running cluster's keys must not move
// when the code changes.
func TestLayoutKeys(t *testing.T) {
	for _, prefix := range []Layout{"/shardlimit/", "/shardlimit"} {
		for got, want := range map[string]string{
			prefix.Member("shard-1"):                       "/shardlimit/members/shard-1",
			prefix.MemberID("/shardlimit/members/shard-1"): "shard-1",
			prefix.Rule("shop", "per-user"):                "/shardlimit/rules/shop/per-user",
			prefix.ShardMap():                              "/shardlimit/shardmap",
			prefix.Grant("spiffe://shardlimit/router"):     "/shardlimit/grants/spiffe://shardlimit/router",
			prefix.GrantID("/shardlimit/grants/envoy"):     "envoy",
			prefix.ShardMapVersion(12):                     "/shardlimit/shardmap-history/00000000000000000012",
			prefix.Election():                              "/shardlimit/rebalance/election",
			prefix.Run(5):                                  "/shardlimit/rebalance/runs/00000000000000000005",
			prefix.HandoffLock():                           "/shardlimit/handoff/lock",
			prefix.UnreachableReport("shard-1", "7f3a"):    "/shardlimit/unreachable/shard-1/7f3a",
			prefix.Eviction("shard-1"):                     "/shardlimit/evictions/shard-1",
			prefix.EvictionAck("shard-1"):                  "/shardlimit/eviction-acks/shard-1",
		} {
			if got != want {
				t.Errorf("prefix %q: got %q, want %q", prefix, got, want)
			}
		}
	}
}
