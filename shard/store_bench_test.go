package shard

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/shardlimit/shardlimit/shard/episodes"
	"github.com/shardlimit/shardlimit/shard/hotkeys"
	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
	"github.com/shardlimit/shardlimit/shard/load"
	"github.com/shardlimit/shardlimit/shard/shardmap"
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

// benchBatch is the batch size of BenchmarkDecide: a small batch, as a
// router coalescing single-check requests sends under load.
const benchBatch = 16

// BenchmarkDecide measures one decision as the server makes it, in a batch
// of benchBatch checks through Store.DecideBatch: the router's placement
// hash comes with each check, so the store computes only the key's other
// half; the clock is read, the load bucket found and a hot-key stripe
// locked once per batch; then, per check, lock the stripe, run the
// algorithm, store the state, count load and sampled hot keys. ns/op is
// per check.
func BenchmarkDecide(b *testing.B) {
	for _, r := range benchRules() {
		for _, n := range []int{1, 1000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/keys=%d", r.Algorithm, n), func(b *testing.B) { benchDecide(b, r, n, benchBatch) })
		}
	}
}

// BenchmarkDecideBatch is BenchmarkDecide with batches of one check (a
// clock reading per check) and of 100.
func BenchmarkDecideBatch(b *testing.B) {
	for _, r := range benchRules()[:1] {
		for _, n := range []int{1000, 1_000_000} {
			for _, size := range []int{1, 100} {
				b.Run(fmt.Sprintf("%s/keys=%d/batch=%d", r.Algorithm, n, size), func(b *testing.B) { benchDecide(b, r, n, size) })
			}
		}
	}
}

// BenchmarkDecideJournaled is BenchmarkDecide with the decision path's
// journal of a planned hand-off (journal.go) off, as it is but during a
// hand-off, and on for every partition, as on a shard draining all of
// them between its first and its final copy:
//
//	go test -run '^$' -bench DecideJournaled -count 5 ./shard/
func BenchmarkDecideJournaled(b *testing.B) {
	r := benchRules()[0]
	for _, n := range []int{1000, 1_000_000} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/keys=%d/journal=%v", r.Algorithm, n, on), func(b *testing.B) {
				var j *journal
				if on {
					j = &journal{}
					j.start(allPartitions, 1)
				}
				benchDecideJournal(b, r, n, benchBatch, j)
			})
		}
	}
}

// allPartitions are the 1024 partitions the benchmarks' checks fall in.
var allPartitions = func() []uint32 {
	parts := make([]uint32, 1024)
	for p := range parts {
		parts[p] = uint32(p)
	}
	return parts
}()

// benchDecide decides checks on n keys, every key present (steady state),
// in batches of size. ns/op is per check.
func benchDecide(b *testing.B, r *limiter.Rule, n, size int) {
	benchDecideJournal(b, r, n, size, nil)
}

// benchDecideJournal is benchDecide with each batch recorded in j when
// set, as the decision path does.
func benchDecideJournal(b *testing.B, r *limiter.Rule, n, size int, j *journal) {
	us := users(n)
	s := serverStore(b, time.Now().UnixNano())
	// Any window of size checks from i < n is a batch: the list wraps.
	checks := make([]BatchCheck, n+size)
	for i := range checks {
		u := us[i%n]
		h := key.Hash("svc", "r", u)
		checks[i] = BatchCheck{Check: Check{Service: "svc", Rule: "r", User: u, Hits: 1, Partition: key.Partition(h, 1024)}, Limiter: r}
	}
	out := make([]limiter.Decision, size)
	for i := 0; i < n; i += size {
		m := min(size, n-i)
		s.DecideBatch(checks[i:i+m], time.Now().UnixNano(), 1, out[:m])
	}
	var after func([]BatchCheck)
	if j != nil {
		after = func(batch []BatchCheck) {
			j.record(batch)
			if !j.active.Load() {
				j.start(allPartitions, 1) // overflowed: a hand-off holds at most that many
			}
		}
	}
	decideParallel(b, s, checks, n, size, after)
}

// BenchmarkHotKeyBesideOthers runs one goroutine per P on a single hot key
// and the others on 1000 keys, to show that a hot key holds only its own
// stripe: ns/op here stays near keys=1000, not keys=1.
func BenchmarkHotKeyBesideOthers(b *testing.B) {
	r := benchRules()[0]
	us := users(1000)
	s := serverStore(b, time.Now().UnixNano())
	var g atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		hot := g.Add(1) == 1
		c := Check{Service: "svc", Rule: "r", Hits: 1, User: "hot"}
		for i := 0; pb.Next(); i++ {
			if !hot {
				c.User = us[i%1000]
			}
			decideOne(s, &c, time.Now().UnixNano(), r, 1)
		}
	})
}

// BenchmarkBaseline is the project's reference decision (BENCHMARKS.md), re-measured on the
// same machine in the same run: a 256-way sharded Go map of a counter per
// key, xxhash of the key, a clock read, nothing else. Our figures are
// compared with it, because absolute figures drift between machines.
func BenchmarkBaseline(b *testing.B) {
	for _, n := range []int{1000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			us := users(n)
			type baseStripe struct {
				mu sync.Mutex
				m  map[uint64][2]int64
				_  [40]byte
			}
			var st [stripes]baseStripe
			for i := range st {
				st[i].m = make(map[uint64][2]int64)
			}
			for _, u := range us {
				h := xxhash.Sum64String(u)
				st[h>>56].m[h] = [2]int64{}
			}
			var start atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(7919)) % n
				for pb.Next() {
					h := xxhash.Sum64String(us[i])
					now := time.Now().UnixNano()
					s := &st[h>>56]
					s.mu.Lock()
					v := s.m[h]
					if v[0] < now {
						v[0], v[1] = now, v[1]+1
					}
					s.m[h] = v
					s.mu.Unlock()
					if i++; i == n {
						i = 0
					}
				}
			})
		})
	}
}

// BenchmarkClock is the cost of one clock read on this machine.
func BenchmarkClock(b *testing.B) {
	var sink int64
	for range b.N {
		sink += time.Now().UnixNano()
	}
	runtime.KeepAlive(sink)
}

// serverStore returns a store with the bookkeeping the server gives it:
// episodes, load per partition and sampled hot keys, with default options.
func serverStore(b *testing.B, now int64) *Store {
	o := DefaultOptions()
	ep, err := episodes.New(episodes.Options{Capacity: o.Episodes})
	if err != nil {
		b.Fatal(err)
	}
	hot, err := hotkeys.New(hotkeys.Options{K: o.TopKeys, Sample: o.TopKeysSample, ExactUpTo: o.TopKeysExact})
	if err != nil {
		b.Fatal(err)
	}
	// o.Partitions is 0, the cluster's count, which a server reads from the
	// shard map: the default count stands in for it.
	return NewStore(StoreOptions{Episodes: episodeLog{ep}, Load: load.New(shardmap.DefaultPartitions), Hot: hot}, now)
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
		decideOne(s, &c, now, r, 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		panic(fmt.Sprintf("store holds %d keys, want %d", s.Len(), n))
	}
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}
