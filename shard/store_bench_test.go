package shard

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/limiter"
)

// benchRules are the algorithms at settings where most decisions are
// allowed, so the benchmark measures the common path.
func benchRules() []*limiter.Rule {
	hour := int64(time.Hour)
	return []*limiter.Rule{
		{Algorithm: limiter.TokenBucket, Limit: 1_000_000, Period: hour},
		{Algorithm: limiter.GCRA, Limit: 1_000_000, Period: hour},
		{Algorithm: limiter.FixedWindow, Limit: 1_000_000, Period: hour},
		{Algorithm: limiter.SlidingWindow, Limit: 1_000_000, Period: hour},
		{Algorithm: limiter.LeakyBucket, Limit: 1_000_000, Period: hour, MaxDelay: hour},
		{Algorithm: limiter.SlidingLog, Limit: 100, Period: int64(time.Second)},
	}
}

func users(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "user-" + strconv.Itoa(i)
	}
	return out
}

// BenchmarkDecide measures one decision as the server makes it: hash the
// key, read the clock, lock the stripe, run the algorithm, store the state.
func BenchmarkDecide(b *testing.B) {
	for _, r := range benchRules() {
		for _, n := range []int{1, 1000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/keys=%d", r.Algorithm, n), func(b *testing.B) {
				us := users(n)
				s := NewStore(StoreOptions{}, time.Now().UnixNano())
				for _, u := range us { // every key present, as in steady state
					c := Check{Service: "svc", Rule: "r", User: u, Hits: 1}
					s.Decide(MakeKey("svc", "r", u), &c, time.Now().UnixNano(), r, 1)
				}
				var start atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(start.Add(7919)) % n
					c := Check{Service: "svc", Rule: "r", Hits: 1}
					for pb.Next() {
						c.User = us[i]
						s.Decide(MakeKey(c.Service, c.Rule, c.User), &c, time.Now().UnixNano(), r, 1)
						if i++; i == n {
							i = 0
						}
					}
				})
			})
		}
	}
}

// BenchmarkBytesPerKey fills a store with N keys per algorithm and reports
// the heap bytes per key. Large N is slow and needs memory: it runs only
// when SHARDLIMIT_BENCH_KEYS lists the counts (make bench-memory).
func BenchmarkBytesPerKey(b *testing.B) {
	counts := os.Getenv("SHARDLIMIT_BENCH_KEYS")
	if counts == "" {
		b.Skip("set SHARDLIMIT_BENCH_KEYS=1000000,10000000 to run")
	}
	var ns []int
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("SHARDLIMIT_BENCH_KEYS: %v", err)
		}
		ns = append(ns, n)
	}
	for _, r := range benchRules() {
		for _, n := range ns {
			if r.Algorithm == limiter.SlidingLog && n > 1_000_000 {
				continue // 8 bytes × limit per key: the 1M figure gives the per-key overhead
			}
			b.Run(fmt.Sprintf("%s/keys=%d", r.Algorithm, n), func(b *testing.B) {
				for range b.N {
					b.ReportMetric(heapBytesPerKey(r, n), "bytes/key")
				}
			})
		}
	}
}

func heapBytesPerKey(r *limiter.Rule, n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewStore(StoreOptions{}, time.Now().UnixNano())
	now := time.Now().UnixNano()
	c := Check{Service: "svc", Rule: "r", Hits: 1}
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
		c.User = string(buf)
		s.Decide(MakeKey(c.Service, c.Rule, c.User), &c, now, r, 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		panic(fmt.Sprintf("store holds %d keys, want %d", s.Len(), n))
	}
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
