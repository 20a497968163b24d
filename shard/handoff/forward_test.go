package handoff_test

import (
	"context"
	"testing"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/metrictest"
)

// A planned hand-off's final copy reads only the keys that changed since
// the journaled first copy, and fences the source, which from then on
// forwards the partitions' checks to the destination and answers with its
// decisions, counted there once; once the source drops the partitions, it
// answers not decided.
func TestFinalCopyReadsTheChangedAndTheSourceForwards(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sa, a := startShard(t, prefix, "a")
	_, b := startShard(t, prefix, "b")
	fill(t, a, 100, 5)
	ctx := context.Background()
	pull := func(req *shardlimitv1.PullRequest) *shardlimitv1.PullResponse {
		t.Helper()
		req.SourceId, req.SourceAddr, req.Partitions, req.PartitionCount = "a", sa.Addr(), allParts(), partitions
		resp, err := b.Pull(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if first := pull(&shardlimitv1.PullRequest{Journal: true}); first.Keys != 100 {
		t.Fatalf("first copy: %d keys, want 100", first.Keys)
	}
	for _, u := range []string{"u0", "u1", "u2"} {
		if d := decideOne(t, a, u); !d.Allowed || d.NotDecided || d.Remaining != 4 {
			t.Fatalf("%s at the source before the fence: %v, want allowed with 4 left", u, d)
		}
	}
	if final := pull(&shardlimitv1.PullRequest{Final: true}); final.Keys != 3 || final.Imported != 3 {
		t.Fatalf("final copy: %d keys (%d imported), want the 3 changed since the first", final.Keys, final.Imported)
	}
	// Forwarded: decided at b, with every hit a counted.
	if d := decideOne(t, a, "u0"); !d.Allowed || d.NotDecided || d.Remaining != 3 {
		t.Fatalf("u0 at the fenced source: %v, want forwarded and allowed with 3 left", d)
	}
	if d := decideOne(t, b, "u0"); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("u0 at the destination: %v, want allowed with 2 left (the forwarded hit counted there)", d)
	}
	if n := metrictest.Value(t, sa.Registry(), "shardlimit_shard_forwarded_checks_total", map[string]string{"result": "decided"}); n != 1 {
		t.Fatalf("the source forwarded %v checks, want 1", n)
	}
	if _, err := a.Drop(ctx, &shardlimitv1.DropRequest{Partitions: allParts(), PartitionCount: partitions}); err != nil {
		t.Fatal(err)
	}
	if d := decideOne(t, a, "u0"); !d.NotDecided || d.Allowed {
		t.Fatalf("u0 at the source after it dropped the partitions: %v, want not decided", d)
	}
	if d := decideOne(t, b, "u0"); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("u0 at the destination: %v, want allowed with 1 left", d)
	}
}

// A forwarded check is never forwarded again: a shard that fenced its
// partitions with a forward answers a forwarded check not decided.
func TestForwardedChecksAreNotForwardedAgain(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sa, a := startShard(t, prefix, "a")
	_, b := startShard(t, prefix, "b")
	fill(t, a, 10, 1)
	if _, err := b.Pull(context.Background(), &shardlimitv1.PullRequest{
		SourceId: "a", SourceAddr: sa.Addr(), Partitions: allParts(), PartitionCount: partitions, Final: true,
	}); err != nil {
		t.Fatal(err)
	}
	req := &shardlimitv1.DecideRequest{Rules: []*shardlimitv1.RuleParams{fixedWindow}, Forwarded: true}
	req.Checks = []*shardlimitv1.ShardCheck{{Service: "s", User: "u0", Hits: 1, Partition: partitionOf("u0")}}
	resp, err := a.Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; !d.NotDecided {
		t.Fatalf("a forwarded check at a fenced source: %v, want not decided", d)
	}
}

func partitionOf(user string) uint32 {
	return uint32(key.Partition(key.Hash("s", "r", user), partitions))
}
