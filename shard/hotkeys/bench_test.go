package hotkeys

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
)

// BenchmarkObserve is the per-decision call, on three streams:
//   - zipf: s=1.1 over 100k keys, mostly hits of monitored keys;
//   - uniform: 1M keys evenly, nearly every call evicts (the worst case);
//   - one-key: a single flooding key, which striping by key would make
//     every core's lock.
//
// Each stream runs with the default 8 stripes and with 1, to show what
// spreading writers over stripes saves under two cores; and sampled one in
// 8, as shards do at high volume: past ExactUpTo (sample=8, set to 1 so the
// whole run is past it) and before it (sample=8/exact, never past it:
// every call observed, plus the atomic count of the exact phase, which a
// period pays for its first ExactUpTo calls only).
func BenchmarkObserve(b *testing.B) {
	zipfStream, _ := zipf(1<<16, 100_000, 1.1, 1)
	uniform := make([]int, 1<<16)
	x := uint64(88172645463325252)
	for i := range uniform {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		uniform[i] = int(x % 1_000_000)
	}
	streams := []struct {
		name   string
		stream []int
	}{
		{"zipf", zipfStream},
		{"uniform", uniform},
		{"one-key", make([]int, 1<<16)},
	}
	users := make([]string, 1024)
	for i := range users {
		users[i] = strconv.Itoa(i)
	}
	for _, s := range streams {
		for _, o := range []Options{{Stripes: 8}, {Stripes: 1}, {Stripes: 8, Sample: 8, ExactUpTo: 1}, {Stripes: 8, Sample: 8, ExactUpTo: 1 << 40}} {
			name := fmt.Sprintf("%s/stripes=%d", s.name, o.Stripes)
			if o.Sample > 1 {
				name += fmt.Sprintf("/sample=%d", o.Sample)
			}
			if o.ExactUpTo > 1 {
				name += "/exact"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				tr := newTracker(b, o)
				var start atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					j := int(start.Add(1 << 15)) // writers start apart in the stream
					for pb.Next() {
						i := s.stream[j&(1<<16-1)]
						tr.Observe(key(i), "service", "rule", users[i&1023], 1) // users from the same small set: the strings are only referenced
						j++
					}
				})
			})
		}
	}
}

// BenchmarkTop merges the default Tracker's 16 full summaries; it is not
// on the decision path.
func BenchmarkTop(b *testing.B) {
	b.ReportAllocs()
	tr := newTracker(b, Options{})
	stream, _ := zipf(1<<16, 100_000, 1.1, 1)
	for _, i := range stream {
		tr.Observe(key(i), "service", "rule", "user", 1)
	}
	tr.Rotate()
	for _, i := range stream {
		tr.Observe(key(i), "service", "rule", "user", 1)
	}
	for b.Loop() {
		tr.Top(0)
	}
}

// BenchmarkObserveBatch is the shard's path: the decisions of one batch
// (50 checks, as a router's call at 100 checks per request over two
// shards) observed on one Batch, on the zipf stream, sampled one in 8 as
// shards are, before ExactUpTo (exact) and past it (sampled). An op is one
// call. Its keys are the store's: a 64-bit hash in Hi, Lo 0.
func BenchmarkObserveBatch(b *testing.B) {
	stream, _ := zipf(1<<16, 100_000, 1.1, 1)
	for _, phase := range []struct {
		name string
		o    Options
	}{{"exact", Options{Sample: 8, ExactUpTo: 1 << 40}}, {"sampled", Options{Sample: 8, ExactUpTo: 1}}} {
		b.Run(phase.name, func(b *testing.B) {
			b.ReportAllocs()
			tr := newTracker(b, phase.o)
			var start atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				j := int(start.Add(1 << 15))
				bt := tr.Batch()
				for n := 0; pb.Next(); n++ {
					if n%50 == 0 {
						bt.Done()
						bt = tr.Batch()
					}
					i := stream[j&(1<<16-1)]
					bt.Observe(Key{Hi: key(i).Hi}, "service", "rule", "user", 1)
					j++
				}
				bt.Done()
			})
		})
	}
}
