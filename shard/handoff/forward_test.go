package handoff_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/metrictest"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/shardmap"
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
	if first := pullAll(t, b, sa, &shardlimitv1.PullRequest{Journal: true}); first.Keys != 100 {
		t.Fatalf("first copy: %d keys, want 100", first.Keys)
	}
	for _, u := range []string{"u0", "u1", "u2"} {
		if d := decideOne(t, a, u); !d.Allowed || d.NotDecided || d.Remaining != 4 {
			t.Fatalf("%s at the source before the fence: %v, want allowed with 4 left", u, d)
		}
	}
	if final := pullAll(t, b, sa, &shardlimitv1.PullRequest{Final: true}); final.Keys != 3 || final.Imported != 3 {
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
	pullAll(t, b, sa, &shardlimitv1.PullRequest{Final: true})
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

// BenchmarkFinalCopy measures what a planned hand-off costs the checks of
// the partitions it moves: after the journaled first copy of 1M keys,
// churn keys change at the source, and the final copy (fenced: the
// partitions are decided by nobody until it is merged) reads only those.
// It reports the first copy's keys per second and the final copy's time,
// the window during which the moving partitions' checks wait:
//
//	go test -run '^$' -bench FinalCopy -benchtime 3x ./shard/handoff/
func BenchmarkFinalCopy(b *testing.B) {
	const n = 1_000_000
	for _, churn := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d/changed=%d", n, churn), func(b *testing.B) {
			var first, final time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				prefix := fmt.Sprintf("/test/%s/%d/", b.Name(), i)
				i++
				src, from := startShard(b, prefix, "from")
				_, to := startShard(b, prefix, "to")
				fill(b, from, n, 1)
				start := time.Now()
				c := pullAll(b, to, src, &shardlimitv1.PullRequest{Journal: true})
				first += time.Since(start)
				if c.Keys != n {
					b.Fatalf("first copy: %v", c)
				}
				fill(b, from, churn, 1) // u0..u<churn-1> change
				b.StartTimer()
				start = time.Now()
				c = pullAll(b, to, src, &shardlimitv1.PullRequest{Final: true})
				final += time.Since(start)
				if c.Keys != uint64(churn) {
					b.Fatalf("final copy: %v; want the %d keys changed", c, churn)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/first.Seconds(), "first-copy-keys/s")
			b.ReportMetric(final.Seconds()*1000/float64(b.N), "final-copy-ms")
		})
	}
}

// BenchmarkForwarded compares a batch of 100 checks decided by their
// partitions' owner with the same batch sent to the shard that handed
// the partitions over, which forwards it (routers that have not switched
// yet, for at most --handoff-settle):
//
//	go test -run '^$' -bench Forwarded ./shard/handoff/
func BenchmarkForwarded(b *testing.B) {
	prefix := "/test/" + b.Name() + "/"
	src, from := startShard(b, prefix, "from")
	_, to := startShard(b, prefix, "to")
	fill(b, from, 1000, 1)
	pullAll(b, to, src, &shardlimitv1.PullRequest{Final: true})
	req := &shardlimitv1.DecideRequest{Rules: []*shardlimitv1.RuleParams{fixedWindow}}
	for i := range 100 {
		u := fmt.Sprintf("u%d", i)
		req.Checks = append(req.Checks, &shardlimitv1.ShardCheck{Service: "s", User: u, Hits: 0, Partition: partitionOf(u)})
	}
	for _, bc := range []struct {
		name string
		c    shardlimitv1.ShardClient
	}{{"owner", to}, {"forwarded", from}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := bc.c.Decide(context.Background(), req)
				if err != nil || resp.Decisions[0].NotDecided {
					b.Fatalf("%v %v", resp.GetDecisions()[0], err)
				}
			}
		})
	}
}

// Only a fenced or final copy makes a shard decide what it pulled: after a
// first copy the source still decides the partitions, so a shard that
// gains them afterwards without a hand-off takes them over with a fence.
// A final copy that fails leaves them undecided (not Receiving) too.
func TestOnlyAFinalCopyMakesTheDestinationDecide(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sa, _ := startIn(t, prefix, "a", nil)
	sb, b := startIn(t, prefix, "b", nil)
	waitOwns(t, sa, "b")
	state := func(st string) float64 {
		return metrictest.Value(t, sb.Registry(), "shardlimit_shard_partitions", map[string]string{"state": st})
	}
	own := state("owned")
	aParts := sa.Owners().PartitionsOf("a")
	if own == 0 || len(aParts) == 0 {
		t.Fatalf("b owns %v partitions, a %d", own, len(aParts))
	}
	pull := func(req *shardlimitv1.PullRequest, addr string) error {
		req.SourceId, req.SourceAddr, req.Partitions, req.PartitionCount = "a", addr, aParts, partitions
		_, err := b.Pull(context.Background(), req)
		return err
	}
	if err := pull(&shardlimitv1.PullRequest{Journal: true}, sa.Addr()); err != nil {
		t.Fatal(err)
	}
	if got := state("owned"); got != own {
		t.Fatalf("after a first copy b owns %v partitions, want its %v", got, own)
	}
	if err := pull(&shardlimitv1.PullRequest{Final: true}, "127.0.0.1:1"); err == nil {
		t.Fatal("a final copy from a closed port succeeded")
	}
	if got, recv := state("owned"), state("receiving"); got != own || recv != 0 {
		t.Fatalf("after a failed final copy b owns %v partitions (want %v), %v receiving (want 0)", got, own, recv)
	}
	if err := pull(&shardlimitv1.PullRequest{Final: true}, sa.Addr()); err != nil {
		t.Fatal(err)
	}
	if got := state("owned"); got != own+float64(len(aParts)) {
		t.Fatalf("after the final copy b owns %v partitions, want %v", got, own+float64(len(aParts)))
	}
}

// A source whose forward-fenced partitions see no switch (here a and b
// are clusters of their own, so a's owner table keeps giving a every
// partition) takes them back from the shard it forwarded to, with what
// that shard counted: the forwarded hits are not lost.
func TestHealTakesBackWhatWasForwarded(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sa, a := startShard(t, prefix, "a")
	_, b := startShard(t, prefix, "b")
	fill(t, a, 10, 5)
	pullAll(t, b, sa, &shardlimitv1.PullRequest{Final: true})
	for range 2 {
		if d := decideOne(t, a, "u0"); !d.Allowed || d.NotDecided {
			t.Fatalf("a forwarded check: %v, want allowed by b", d)
		}
	}
	// After 5 s at the same table (healForwardedAfter: b is still a
	// member, and its switch may come), a takes the partitions over from
	// b, which holds u0's 7 hits.
	poll.Until(t, 30*time.Second, func() error {
		if n := metrictest.Value(t, sa.Registry(), "shardlimit_shard_partitions", map[string]string{"state": "owned"}); n != partitions {
			return fmt.Errorf("a owns %v partitions", n)
		}
		return nil
	})
	read := &shardlimitv1.DecideRequest{Rules: []*shardlimitv1.RuleParams{fixedWindow},
		Checks: []*shardlimitv1.ShardCheck{{Service: "s", User: "u0", Hits: 0, Partition: partitionOf("u0")}}}
	resp, err := a.Decide(context.Background(), read)
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; d.NotDecided || d.Remaining != 3 {
		t.Fatalf("a decides u0 as %v, want 3 remaining (5 filled at a + 2 forwarded to b)", d)
	}
}

// A source whose final copy failed after it fenced (its destination never
// merged it) forwards to a destination that does not decide the
// partition; the rebalance job's switch then publishes a map that keeps
// the partition with the source (package handoff's KeepSources). The
// source takes it back at heal's next look once it sees that table, not
// after heal's wait for a switch that already came (healForwardedAfter,
// 5 s: the review measured 6–7 s of policy answers for the pair's users).
func TestSourceTakesBackAtOnceWhenTheSwitchKeptItThere(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sa, a := startIn(t, prefix, "a", nil)
	sb, _ := startIn(t, prefix, "b", nil)
	waitOwns(t, sa, "b")
	u := usersOf(t, sa, "a", 1)[0]
	if d := decideOne(t, a, u); d.NotDecided || d.Remaining != 9 {
		t.Fatalf("%s before the hand-off: %v, want decided by a with 9 left", u, d)
	}
	// The final copy: a fences the partition, forwarding to b, and
	// streams it; b never merges it (its pull failed).
	fenced := time.Now()
	export, err := a.ExportStream(context.Background(), &shardlimitv1.ExportStreamRequest{
		Partitions: []uint32{partitionOf(u)}, PartitionCount: partitions, Fence: true, ForwardToId: "b", ForwardToAddr: sb.Addr(),
	})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, export)
	if d := decideOne(t, a, u); !d.NotDecided {
		t.Fatalf("%s once its final copy failed: %v, want not decided (forwarded to b, which does not decide it)", u, d)
	}
	// The switch: a map version that keeps the partition with a.
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	m, rev, err := mapstore.Load(ctx, cli, etcd.Layout(prefix))
	if err != nil {
		t.Fatal(err)
	}
	next := &shardmap.Map{Partitions: partitions, Owners: make([]string, partitions), Reason: "a move whose final copy failed, kept with its source"}
	next.Owners[partitionOf(u)] = "a"
	if err := mapstore.Publish(ctx, cli, etcd.Layout(prefix), next, m, rev); err != nil {
		t.Fatal(err)
	}
	var d *shardlimitv1.ShardDecision
	poll.Until(t, 30*time.Second, func() error {
		if d = decideOne(t, a, u); d.NotDecided {
			return fmt.Errorf("%s answered not decided", u)
		}
		return nil
	})
	window := time.Since(fenced)
	t.Logf("%s undecided for %v from the final copy's fence", u, window.Round(10*time.Millisecond))
	if d.Remaining != 8 {
		t.Fatalf("%s decided again: %v, want 8 left (its hit at a kept)", u, d)
	}
	if window >= 5*time.Second { // heal's wait for a switch (healForwardedAfter)
		t.Fatalf("%s undecided for %v: the source waited out heal's wait for a switch that had come", u, window)
	}
}
