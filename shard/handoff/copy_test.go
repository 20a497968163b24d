package handoff_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"crypto/tls"
	"os"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/member"
)

const partitions = 1024

// pki is the test shards' local PKI, made once: shards serve mTLS, pull
// from each other as internal identities, and the test calls them as a
// router.
var pki = sync.OnceValues(func() (*creds.Local, error) {
	dir, err := os.MkdirTemp("", "shardlimit-handoff-pki-")
	if err != nil {
		return nil, err
	}
	return creds.NewLocal(dir)
})

// must returns a config built from files just written, or panics.
func must(cfg *tls.Config, err error) *tls.Config {
	if err != nil {
		panic(err)
	}
	return cfg
}

// startShard starts a shard alone in a cluster of its own, under
// prefix<id>/, stopped abruptly when tb ends: it decides every partition,
// and the tests move counters between such shards by hand.
func startShard(tb testing.TB, prefix, id string) (*shard.Server, shardlimitv1.ShardClient) {
	tb.Helper()
	return startIn(tb, prefix+id+"/", id, nil)
}

// startIn starts shard id in the cluster under prefix, with its options
// adjusted by adjust when set, stopped abruptly when tb ends.
func startIn(tb testing.TB, prefix, id string, adjust func(*shard.Options)) (*shard.Server, shardlimitv1.ShardClient) {
	tb.Helper()
	p, err := pki()
	if err != nil {
		tb.Fatal(err)
	}
	o := shard.DefaultOptions()
	o.ID, o.Etcd, o.Prefix, o.Logger = id, []string{etcdEndpoint}, prefix, slog.New(slog.DiscardHandler)
	// A lease that no stall of a loaded machine outlasts (a 2 s one
	// expired): a test that wants a shard gone revokes its lease.
	o.LeaseTTL, o.HandoffSettle = 10*time.Second, 50*time.Millisecond
	o.TLS = must(creds.ServerTLS(p.Shard, tls.RequireAndVerifyClientCert))
	o.ShardTLS = must(creds.ClientTLS(p.Shard, creds.LocalServerName))
	o.Grants = p.Grants()
	if adjust != nil {
		adjust(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := shard.Start(ctx, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Kill)
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(must(creds.ClientTLS(p.Router, creds.LocalServerName)))))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return s, shardlimitv1.NewShardClient(conn)
}

func memberOf(s *shard.Server) member.Member { return member.Member{ID: s.ID(), Addr: s.Addr()} }

// copyParts has shard to pull parts (numbered among count) from shard
// from, in chunks bounded by chunks, as a hand-off's first copy does
// without a journal.
func copyParts(from member.Member, to shardlimitv1.ShardClient, parts []uint32, count int, chunks handoff.Chunking) (*shardlimitv1.PullResponse, error) {
	return to.Pull(context.Background(), &shardlimitv1.PullRequest{
		SourceId: from.ID, SourceAddr: from.Addr, Partitions: parts, PartitionCount: uint32(count),
		MaxChunkKeys: chunks.Keys, MaxChunkBytes: chunks.Bytes,
	})
}

// waitOwns waits until s's owner table gives id some partitions.
func waitOwns(tb testing.TB, s *shard.Server, id string) {
	tb.Helper()
	poll.Until(tb, 10*time.Second, func() error {
		if n := s.Owners().Count()[id]; n == 0 {
			return fmt.Errorf("%s sees %s own nothing", s.ID(), id)
		}
		return nil
	})
}

// pullAll has dst pull every partition from src, with req's flags, and
// returns what it pulled.
func pullAll(tb testing.TB, dst shardlimitv1.ShardClient, src *shard.Server, req *shardlimitv1.PullRequest) *shardlimitv1.PullResponse {
	tb.Helper()
	req.SourceId, req.SourceAddr, req.Partitions, req.PartitionCount = src.ID(), src.Addr(), allParts(), partitions
	resp, err := dst.Pull(context.Background(), req)
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

// fixedWindow is the tests' rule: 10 a window of 366 days, the longest a
// rule may have. Fixed windows are aligned on the epoch, so a window of an
// hour ended at every turn of the wall-clock hour, and a test that crossed
// one (two loaded CI runs at 14:00) found its users' counts expired; the
// next turn of a 366-day window is 2027-02-13T00:00Z.
var fixedWindow = &shardlimitv1.RuleParams{Name: "r", Algorithm: shardlimitv1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 10, PeriodNs: int64(366 * 24 * time.Hour)}

// fill has n users u0..u<n-1> each spend hits of their fixed-window limit
// of 10 on c, 1000 checks a call. Checks the shard did not decide
// (it lost its lease on a loaded machine, and decides nothing until it
// joined again) are sent again until it does.
func fill(tb testing.TB, c shardlimitv1.ShardClient, n int, hits int64) {
	tb.Helper()
	for from := 0; from < n; from += 1000 {
		req := &shardlimitv1.DecideRequest{Rules: []*shardlimitv1.RuleParams{fixedWindow}}
		for i := from; i < min(n, from+1000); i++ {
			u := fmt.Sprintf("u%d", i)
			req.Checks = append(req.Checks, &shardlimitv1.ShardCheck{
				Service: "s", User: u, Hits: hits, Partition: uint32(key.Partition(key.Hash("s", "r", u), partitions)),
			})
		}
		poll.Until(tb, 30*time.Second, func() error {
			resp, err := c.Decide(context.Background(), req)
			if err != nil {
				tb.Fatal(err)
			}
			left := req.Checks[:0]
			for i, d := range resp.Decisions {
				if d.NotDecided {
					left = append(left, req.Checks[i])
				}
			}
			if req.Checks = left; len(left) > 0 {
				return fmt.Errorf("%d checks not decided", len(left))
			}
			return nil
		})
	}
}

func allParts() []uint32 {
	out := make([]uint32, partitions)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

func keys(tb testing.TB, c shardlimitv1.ShardClient) uint64 {
	tb.Helper()
	st, err := c.Stats(context.Background(), &shardlimitv1.StatsRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	return st.Keys
}

// 100,000 keys, more than one gRPC message could hold (about 82,000),
// move in chunks of at most the asked-for bound, and every user at their
// limit on the source is at their limit on the destination. A second copy
// changes nothing.
func TestCopyStreamsAnyNumberOfKeysInBoundedChunks(t *testing.T) {
	const n = 100_000
	prefix := "/test/" + t.Name() + "/"
	sa, a := startShard(t, prefix, "a")
	_, b := startShard(t, prefix, "b")
	fill(t, a, n, 10)
	if got := keys(t, a); got != n {
		t.Fatalf("source holds %d keys, want %d", got, n)
	}
	start := time.Now()
	c, err := copyParts(memberOf(sa), b, allParts(), partitions, handoff.Chunking{Keys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("copied %d keys in %d chunks in %v", c.Keys, c.Chunks, time.Since(start).Round(time.Millisecond))
	if c.Keys != n || c.Imported != n || c.Chunks < n/1000 || c.Chunks > n/1000+256 {
		t.Fatalf("copy: %+v, want %d keys in chunks of at most 1000 (at most one short chunk a stripe)", c, n)
	}
	if got := keys(t, b); got != n {
		t.Fatalf("destination holds %d keys, want %d", got, n)
	}
	again, err := copyParts(memberOf(sa), b, allParts(), partitions, handoff.Chunking{Bytes: 64 << 10})
	if err != nil || again.Imported != 0 || again.Kept != n {
		t.Fatalf("second copy: %+v, %v; want every key kept as it was", again, err)
	}
	// Every user is at their limit on b: one more hit each is denied.
	req := &shardlimitv1.DecideRequest{Rules: []*shardlimitv1.RuleParams{fixedWindow}}
	for i := 0; i < n; i += n / 100 {
		req.Checks = append(req.Checks, &shardlimitv1.ShardCheck{Service: "s", User: fmt.Sprintf("u%d", i), Hits: 1})
	}
	resp, err := b.Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range resp.Decisions {
		if d.Allowed {
			t.Fatalf("user %s allowed past their limit after the copy", req.Checks[i].User)
		}
	}
}

// Bad chunk bounds and partitions are refused with the field named, and
// nothing moves.
func TestExportStreamRejectsBadBounds(t *testing.T) {
	prefix := "/test/" + t.Name() + "/"
	sa, a := startShard(t, prefix, "a")
	_, b := startShard(t, prefix, "b")
	fill(t, a, 10, 1)
	for _, tc := range []struct {
		parts  []uint32
		count  int
		chunks handoff.Chunking
		want   string
	}{
		{allParts(), partitions, handoff.Chunking{Keys: 1 << 20}, "max_chunk_keys: 1048576 is over the maximum of 65536"},
		{allParts(), partitions, handoff.Chunking{Bytes: 64 << 20}, "max_chunk_bytes: 67108864 is over the maximum of 2097152"},
		{[]uint32{5}, 4, handoff.Chunking{}, "partitions[0]: 5 not in 0..3"},
		{nil, partitions, handoff.Chunking{}, "partitions: at least 1 is required"},
	} {
		_, err := copyParts(memberOf(sa), b, tc.parts, tc.count, tc.chunks)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
	if _, err := copyParts(member.Member{ID: "nobody"}, b, allParts(), partitions, handoff.Chunking{}); err == nil ||
		!strings.Contains(err.Error(), "source_addr: required") {
		t.Errorf("pull without a source address: %v", err)
	}
	if got := keys(t, b); got != 0 {
		t.Fatalf("refused copies stored %d keys", got)
	}
}

// BenchmarkHandoff streams 1M keys between two shards over real gRPC on
// loopback, each time onto an empty destination, and reports keys per
// second of wall time and of the process's CPU time (both shards):
//
//	go test -run '^$' -bench Handoff -benchtime 3x ./shard/handoff/
func BenchmarkHandoff(b *testing.B) {
	const n = 1_000_000
	prefix := "/test/" + b.Name() + "/"
	src, from := startShard(b, prefix, "from")
	fill(b, from, n, 1)
	var took, cpu time.Duration
	i := 0
	for b.Loop() {
		// Each copy lands on an empty destination, as a hand-off does (a
		// drop forgets only partitions a shard no longer decides).
		b.StopTimer()
		_, to := startShard(b, prefix, fmt.Sprint("to", i))
		i++
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		c, err := copyParts(memberOf(src), to, allParts(), partitions, handoff.Chunking{})
		took, cpu = took+time.Since(start), cpu+cpuTime()-cpu0
		if err != nil || c.Keys != n || c.Imported != n {
			b.Fatalf("copy: %+v, %v", c, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/took.Seconds(), "keys/s")
	// Both shards run in this process: its CPU time is what the copy cost
	// on both sides, whatever else shares the machine.
	b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "keys/cpu-s")
}

// cpuTime returns the CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
