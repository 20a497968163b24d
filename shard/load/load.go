package load

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// Bucket is the width of one bucket of counts.
	Bucket = int64(10 * time.Second)
	// Window is the span Snapshot counts over.
	Window = 6 * Bucket
	// MaxPartitions is the largest partition count New accepts.
	MaxPartitions = 1 << 16

	slots    = 7  // the current bucket and the six before it
	clearing = -1 // tag of a slot while it is being cleared
	empty    = -2 // tag of a slot that has held no bucket yet
)

// Counter counts decisions per partition over a sliding minute. It is safe
// for concurrent use.
type Counter struct {
	n      int                 // partitions; column n is "other"
	tags   [slots]atomic.Int64 // bucket number held by each slot
	counts []atomic.Uint64     // slots × (n+1), slot-major
	rot    sync.Mutex          // taken only to clear a slot for a new bucket
}

// New returns a Counter for partitions 0..partitions−1. It panics unless
// 1 ≤ partitions ≤ MaxPartitions (the shard map validates the count first).
func New(partitions int) *Counter {
	if partitions < 1 || partitions > MaxPartitions {
		panic(fmt.Sprintf("load: partitions %d not in 1..%d", partitions, MaxPartitions))
	}
	c := &Counter{n: partitions, counts: make([]atomic.Uint64, slots*(partitions+1))}
	for i := range c.tags {
		c.tags[i].Store(empty)
	}
	return c
}

// Partitions returns the partition count the Counter was made for.
func (c *Counter) Partitions() int { return c.n }

// bucketOf returns the bucket number of now, rounding towards −∞.
func bucketOf(now int64) int64 {
	b := now / Bucket
	if now%Bucket < 0 {
		b--
	}
	return b
}

func slotOf(b int64) int {
	s := b % slots
	if s < 0 {
		s += slots
	}
	return int(s)
}

// Add counts n decisions of partition p at time now (Unix ns). A partition
// out of range is counted as "other".
func (c *Counter) Add(p int, now int64, n uint64) {
	b := bucketOf(now)
	s := slotOf(b)
	if c.tags[s].Load() != b && !c.rotate(s, b) {
		return
	}
	if uint(p) >= uint(c.n) {
		p = c.n
	}
	c.counts[s*(c.n+1)+p].Add(n)
}

// rotate makes slot s hold bucket b, clearing it, unless it already holds
// a newer bucket: then it reports false and the caller's Add is dropped.
func (c *Counter) rotate(s int, b int64) bool {
	c.rot.Lock()
	defer c.rot.Unlock()
	switch t := c.tags[s].Load(); {
	case t == b:
		return true
	case t > b:
		return false
	}
	c.tags[s].Store(clearing)
	col := c.counts[s*(c.n+1) : (s+1)*(c.n+1)]
	for i := range col {
		col[i].Store(0)
	}
	c.tags[s].Store(b)
	return true
}

// Snapshot returns the decisions of each partition over the minute up to
// now, as the package documentation describes. It takes no lock.
func (c *Counter) Snapshot(now int64) []uint64 {
	out := make([]uint64, c.n)
	c.sum(now, out, 0, c.n)
	return out
}

// Other returns the decisions counted for out-of-range partitions over the
// minute up to now.
func (c *Counter) Other(now int64) uint64 {
	var out [1]uint64
	c.sum(now, out[:], c.n, c.n+1)
	return out[0]
}

// sum adds columns [lo, hi) of every slot in the window ending at now into
// out[0:hi-lo].
func (c *Counter) sum(now int64, out []uint64, lo, hi int) {
	b := bucketOf(now)
	elapsed := uint64(now - b*Bucket) // into the current bucket, [0, Bucket)
	row := make([]uint64, hi-lo)
	for age := int64(0); age < slots; age++ {
		want := b - age
		s := slotOf(want)
		if c.tags[s].Load() != want {
			continue
		}
		col := c.counts[s*(c.n+1)+lo : s*(c.n+1)+hi]
		for i := range col {
			row[i] = col[i].Load()
		}
		// A slot rotated while it was read holds a bucket newer than now,
		// whose counts are not in this window.
		if c.tags[s].Load() != want {
			continue
		}
		if age == slots-1 {
			// Only the last Bucket−elapsed of the oldest bucket is in the
			// window [now−Window, now].
			for i, v := range row {
				out[i] += scale(v, uint64(Bucket)-elapsed)
			}
			continue
		}
		for i, v := range row {
			out[i] += v
		}
	}
}

// scale returns v × part / Bucket, rounded down, without overflow.
func scale(v, part uint64) uint64 {
	hi, lo := bits.Mul64(v, part)
	q, _ := bits.Div64(hi, lo, uint64(Bucket))
	return q
}
