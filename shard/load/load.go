package load

import (
	"fmt"
	"math/bits"
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

	slots = 7 // the current bucket and the six before it
)

// Counter counts decisions per partition over a sliding minute. It is safe
// for concurrent use.
type Counter struct {
	n     int // partitions; column n of every bucket is "other"
	slots [slots]atomic.Pointer[bucket]
}

// bucket holds the counts of one 10-s bucket. A slot gets a new bucket
// rather than clearing its old one, so a reader or a late writer holding
// the old one never sees or touches the new one's counts.
type bucket struct {
	number int64           // now / Bucket, rounded down
	counts []atomic.Uint64 // partitions + 1
}

// New returns a Counter for partitions 0..partitions−1. It panics unless
// 1 ≤ partitions ≤ MaxPartitions (the shard map validates the count first).
func New(partitions int) *Counter {
	if partitions < 1 || partitions > MaxPartitions {
		panic(fmt.Sprintf("load: partitions %d not in 1..%d", partitions, MaxPartitions))
	}
	return &Counter{n: partitions}
}

// Partitions returns the partition count the Counter was made for.
func (c *Counter) Partitions() int { return c.n }

// numberOf returns the bucket number of now, rounding towards −∞.
func numberOf(now int64) int64 {
	b := now / Bucket
	if now%Bucket < 0 {
		b--
	}
	return b
}

func slotOf(number int64) int {
	s := number % slots
	if s < 0 {
		s += slots
	}
	return int(s)
}

// Add counts n decisions of partition p at time now (Unix ns). A partition
// out of range is counted as "other".
func (c *Counter) Add(p int, now int64, n uint64) { c.Batch(now).Add(p, n) }

// Batch counts a batch of decisions made at one time: it finds their
// bucket once, then each Add is one atomic add.
type Batch struct {
	b *bucket // nil: the time is too late to count
	n int
}

// Batch returns the Batch that counts decisions at time now (Unix ns).
func (c *Counter) Batch(now int64) Batch {
	number := numberOf(now)
	b := c.slots[slotOf(number)].Load()
	if b == nil || b.number != number {
		b = c.start(number)
	}
	return Batch{b: b, n: c.n}
}

// Add counts n decisions of partition p, as Counter.Add does at the
// batch's time.
func (b Batch) Add(p int, n uint64) {
	if b.b == nil {
		return
	}
	if uint(p) >= uint(b.n) {
		p = b.n
	}
	b.b.counts[p].Add(n)
}

// start returns the bucket of the given number, putting a new one in its
// slot unless the slot holds a newer one: then it returns nil, and the
// caller's Add, a minute late, is dropped.
func (c *Counter) start(number int64) *bucket {
	slot := &c.slots[slotOf(number)]
	for {
		old := slot.Load()
		switch {
		case old != nil && old.number == number:
			return old
		case old != nil && old.number > number:
			return nil
		}
		b := &bucket{number: number, counts: make([]atomic.Uint64, c.n+1)}
		if slot.CompareAndSwap(old, b) {
			return b
		}
	}
}

// Snapshot returns the decisions of each partition over the minute up to
// now, as the package documentation describes. It takes no lock.
func (c *Counter) Snapshot(now int64) []uint64 {
	out := make([]uint64, c.n)
	c.sum(now, out, 0)
	return out
}

// Other returns the decisions counted for out-of-range partitions over the
// minute up to now.
func (c *Counter) Other(now int64) uint64 {
	var out [1]uint64
	c.sum(now, out[:], c.n)
	return out[0]
}

// sum adds columns [lo, lo+len(out)) of every bucket in the window ending
// at now into out.
func (c *Counter) sum(now int64, out []uint64, lo int) {
	number := numberOf(now)
	elapsed := uint64(now - number*Bucket) // into the current bucket, [0, Bucket)
	for age := int64(0); age < slots; age++ {
		b := c.slots[slotOf(number-age)].Load()
		if b == nil || b.number != number-age {
			continue
		}
		col := b.counts[lo : lo+len(out)]
		if age == slots-1 {
			// Only the last Bucket−elapsed of the oldest bucket is in the
			// window [now−Window, now].
			for i := range col {
				out[i] += scale(col[i].Load(), uint64(Bucket)-elapsed)
			}
			continue
		}
		for i := range col {
			out[i] += col[i].Load()
		}
	}
}

// scale returns v × part / Bucket, rounded down, without overflow.
func scale(v, part uint64) uint64 {
	hi, lo := bits.Mul64(v, part)
	q, _ := bits.Div64(hi, lo, uint64(Bucket))
	return q
}
