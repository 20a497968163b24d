package load

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkAdd adds one decision per call to partitions spread like hashed
// keys, with time moving 100 ns per call (about one core's decision rate,
// so a bucket rotates every 10⁸ calls).
func BenchmarkAdd(b *testing.B) {
	for _, parts := range []int{1024, MaxPartitions} {
		b.Run(fmt.Sprintf("p=%d", parts), func(b *testing.B) {
			b.ReportAllocs()
			l := New(parts)
			var seed atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				x := seed.Add(0x9e3779b97f4a7c15)
				now := t0
				for pb.Next() {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					now += 100
					l.Add(int(x&uint64(parts-1)), now, 1) // parts is a power of two
				}
			})
		})
	}
}

// BenchmarkSnapshot reads the largest Counter; it is not on the decision
// path (the rebalance job asks every few seconds).
func BenchmarkSnapshot(b *testing.B) {
	b.ReportAllocs()
	l := New(MaxPartitions)
	for p := range MaxPartitions {
		l.Add(p, t0, 1)
	}
	for b.Loop() {
		l.Snapshot(t0 + 30*sec)
	}
}
