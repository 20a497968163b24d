package shard

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// batchChecks returns a check per user of (svc, r) under rule rl, each
// with its placement hash and partition among 1024, as a router sends
// them. With same, every check carries the first user's placement hash
// and partition instead: what a flood of users whose XXH64 sums collide
// sends (the audit's flood of issue 23: before it, the store took the
// router's hash as the key's high half, so the users shared a stripe and
// a home slot, and differed in the low half only).
func batchChecks(svc, r string, us []string, rl *limiter.Rule, same bool) []BatchCheck {
	checks := make([]BatchCheck, len(us))
	for i, u := range us {
		h := key.Hash(svc, r, u)
		if same {
			h = key.Hash(svc, r, us[0])
		}
		checks[i] = BatchCheck{Check: Check{Service: svc, Rule: r, User: u, Hits: 1, Partition: key.Partition(h, 1024)}, Limiter: rl}
	}
	return checks
}

// fill decides every check once, in batches of benchBatch, and returns
// the heap bytes the store grew by per key.
func fill(s *Store, checks []BatchCheck) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out := make([]limiter.Decision, benchBatch)
	for i := 0; i < len(checks); i += benchBatch {
		m := min(benchBatch, len(checks)-i)
		s.DecideBatch(checks[i:i+m], time.Now().UnixNano(), 1, out[:m])
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(checks))
}

// BenchmarkFlood decides checks of 60,000 users that share one placement
// hash (batchChecks: one partition, and before issue 23 one stripe and
// one home slot) and of 60,000 users that do not, in batches of
// benchBatch, cycling over them: ns/op is per check, bytes/key what the
// store holds per user. The same file runs against the previous store
// for the before/after figures in BENCHMARKS.md:
//
//	go test -run '^$' -bench Flood -benchtime 20000x -count 5 ./shard/
func BenchmarkFlood(b *testing.B) {
	const n = 60_000
	for _, same := range []bool{false, true} {
		b.Run(fmt.Sprintf("same-placement=%v/keys=%d", same, n), func(b *testing.B) { benchKeys(b, users(n), same) })
	}
}

// BenchmarkKeys decides checks of 1,000 and 1,000,000 random users, as
// BenchmarkFlood does, and reports the bytes per key.
//
//	go test -run '^$' -bench 'Keys$' -count 5 ./shard/
func BenchmarkKeys(b *testing.B) {
	for _, n := range []int{1000, 1_000_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) { benchKeys(b, users(n), false) })
	}
}

func benchKeys(b *testing.B, us []string, same bool) {
	s := NewStore(StoreOptions{}, time.Now().UnixNano())
	checks := batchChecks("svc", "r", us, benchRules()[0], same)
	perKey := fill(s, checks)
	checks = append(checks, checks[:benchBatch]...) // any window of benchBatch from i < n is a batch
	decideParallel(b, s, checks, len(us), benchBatch, nil)
	b.ReportMetric(perKey, "bytes/key")
}

// decideParallel decides batches of size of the n checks, the list
// wrapping (checks holds size more), on every P, then after(batch) when
// set. ns/op is per check.
func decideParallel(b *testing.B, s *Store, checks []BatchCheck, n, size int, after func([]BatchCheck)) {
	var start atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(start.Add(7919)) % n
		out := make([]limiter.Decision, size)
		for {
			m := 0
			for m < size && pb.Next() {
				m++
			}
			if m == 0 {
				return
			}
			s.DecideBatch(checks[i:i+m], time.Now().UnixNano(), 1, out[:m])
			if after != nil {
				after(checks[i : i+m])
			}
			i = (i + m) % n
		}
	})
}
