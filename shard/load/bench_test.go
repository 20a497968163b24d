package load

import (
	"testing"
	"time"
)

// BenchmarkAdd adds one decision per call to partitions spread like
// hashed keys, with time moving 100 ns per call (a bucket rotates every 10⁸ calls).
func BenchmarkAdd(b *testing.B) {
	for _, parts := range []int{1024, MaxPartitions} {
		b.Run(map[int]string{1024: "p=1024", MaxPartitions: "p=65536"}[parts], func(b *testing.B) {
			b.ReportAllocs()
			l := New(parts)
			b.RunParallel(func(pb *testing.PB) {
				x := uint64(time.Now().UnixNano()) | 1
				now := t0
				for pb.Next() {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					// 100 ns is about the decision rate of one core;
					// parts is a power of two.
					now += 100
					l.Add(int(x&uint64(parts-1)), now, 1)
				}
			})
		})
	}
}

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
