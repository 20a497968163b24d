package overlimit

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/shardlimit/shardlimit/shard/key"
)

// benchKeys returns n distinct keys.
func benchKeys(n int) []key.Key {
	keys := make([]key.Key, n)
	for i := range keys {
		keys[i] = key.Make("shop", "checkout", fmt.Sprint("user-", i))
	}
	return keys
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU reports, as cpu-ns/op, the CPU time the process used since
// start per operation: on a machine shared with other work, wall time per
// operation (ns/op) includes waiting for a core, and this does not.
func reportCPU(b *testing.B, start int64) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// holding returns a default-sized cache holding denials of keys, in force
// until far in the future.
func holding(keys []key.Key) *Cache {
	c := New(100_000)
	for _, k := range keys {
		c.Add(k, 1, 1, Denial{Limit: 10, RetryAt: 1 << 60}, 0)
	}
	return c
}

// Lookup of a key held (a flooding user), of a key not held while others
// are, and of any key while nothing is held (no user over a limit). The
// keys are hashed beforehand: the caller hashes each check once anyway.
func BenchmarkLookup(b *testing.B) {
	keys := benchKeys(20_000)
	held, absent := keys[:10_000], keys[10_000:]
	for _, bc := range []struct {
		name string
		c    *Cache
		keys []key.Key
		hit  bool
	}{
		{"hit", holding(held), held, true},
		{"miss", holding(held), absent, false},
		{"empty", New(100_000), keys, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			start := cpuTime(b)
			for b.Loop() {
				if _, ok := bc.c.Lookup(bc.keys[i], 1, 1, 1); ok != bc.hit {
					b.Fatal("wrong answer")
				}
				if i++; i == len(bc.keys) {
					i = 0
				}
			}
			reportCPU(b, start)
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime(b)
			defer reportCPU(b, start)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					bc.c.Lookup(bc.keys[i], 1, 1, 1)
					if i++; i == len(bc.keys) {
						i = 0
					}
				}
			})
		})
	}
}

// One flooding user looked up from every core: all contend for one stripe.
func BenchmarkLookupOneKeyParallel(b *testing.B) {
	c := New(100_000)
	k := key.Make("shop", "checkout", "mallory")
	c.Add(k, 1, 1, Denial{Limit: 10, RetryAt: 1 << 60}, 0)
	b.ReportAllocs()
	start := cpuTime(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Lookup(k, 1, 1, 1)
		}
	})
	reportCPU(b, start)
}

// Add of denials into a full cache: each evicts or replaces.
func BenchmarkAdd(b *testing.B) {
	keys := benchKeys(200_000)
	c := New(100_000)
	b.ReportAllocs()
	i := 0
	start := cpuTime(b)
	for b.Loop() {
		c.Add(keys[i], 1, 1, Denial{Limit: 10, RetryAt: 1 << 60}, 0)
		if i++; i == len(keys) {
			i = 0
		}
	}
	reportCPU(b, start)
}
