package batcher

import (
	"sync/atomic"
	"testing"
)

// The queue's fast path allocates nothing: an Add into an idle queue,
// sent inline, and Adds from parallel callers of several classes that
// wait for calls in flight and leave together.
func BenchmarkAdd(b *testing.B) {
	b.Run("idle", func(b *testing.B) {
		q := New(Options{Calls: 2}, func([]int) {}, nil)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Add(i, 0, 1, true)
		}
	})
	b.Run("parallel,classes=4", func(b *testing.B) {
		var sent atomic.Int64
		q := New(Options{Calls: 2}, func(batch []int) { sent.Add(int64(len(batch))) }, func(int) {})
		var next atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			class := int(next.Add(1) % 4)
			for pb.Next() {
				q.Add(class, class, 1, true)
			}
		})
	})
}
