package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// The latency histogram is log-linear: values below 2^subBits ns have a
// bucket each; above, every power of two is cut into 2^subBits equal
// buckets. A bucket [lo, hi) is reported as its midpoint, so a quantile is
// off by at most 1/2^(subBits+1) of the value: 0.78% with subBits = 6.
// Values at or past 2^maxExp ns (68.7 s) fall into the last bucket.
//
// It is written by one worker only, but its buckets are atomic so that the
// progress line can read every worker's histogram while they record: a
// record is two uncontended atomic adds, with no lock.
const (
	subBits   = 6
	subCount  = 1 << subBits
	maxExp    = 36
	numBucket = (maxExp - subBits + 1) * subCount
)

// QuantileErrorBound is the largest relative error of a reported quantile.
const QuantileErrorBound = 1.0 / (2 * subCount)

type histogram struct {
	counts [numBucket]atomic.Uint64
	sum    atomic.Uint64 // ns, for the mean
	max    atomic.Uint64 // ns; written by the owner only
}

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	exp := bits.Len64(v) - 1 // v in [2^exp, 2^(exp+1))
	if exp >= maxExp {
		return numBucket - 1
	}
	shift := exp - subBits
	return (shift+1)*subCount + int(v>>shift) - subCount
}

// bucketRange returns the values [lo, hi) of bucket b.
func bucketRange(b int) (lo, hi uint64) {
	if b < subCount {
		return uint64(b), uint64(b) + 1
	}
	shift := b/subCount - 1
	lo = uint64(b%subCount+subCount) << shift
	return lo, lo + 1<<shift
}

func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)].Add(1)
	h.sum.Add(v)
	if v > h.max.Load() {
		h.max.Store(v)
	}
}

// snapshot is a plain copy of histogram counts: the sum of several
// workers' histograms, or the difference of two such sums.
type snapshot struct {
	counts [numBucket]uint64
	total  uint64
	sum    uint64
	max    uint64
}

// add adds h's counts to s.
func (s *snapshot) add(h *histogram) {
	for i := range h.counts {
		n := h.counts[i].Load()
		s.counts[i] += n
		s.total += n
	}
	s.sum += h.sum.Load()
	s.max = max(s.max, h.max.Load())
}

// minus returns s less an earlier snapshot of the same histograms: the
// values recorded in between (max is then the bound of the highest
// bucket hit).
func (s *snapshot) minus(prev *snapshot) *snapshot {
	d := &snapshot{sum: s.sum - prev.sum}
	for i := range s.counts {
		n := s.counts[i] - prev.counts[i]
		d.counts[i] = n
		d.total += n
		if n > 0 {
			_, hi := bucketRange(i)
			d.max = hi - 1
		}
	}
	return d
}

// quantile returns the value at quantile q (0..1) as the midpoint of its
// bucket, capped by the largest value seen; 0 when empty.
func (s *snapshot) quantile(q float64) time.Duration {
	if s.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(s.total)))
	rank = max(rank, 1)
	var seen uint64
	for i, n := range s.counts {
		seen += n
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			if s.max > 0 {
				mid = min(mid, s.max)
			}
			return time.Duration(mid)
		}
	}
	return time.Duration(s.max)
}

func (s *snapshot) mean() time.Duration {
	if s.total == 0 {
		return 0
	}
	return time.Duration(s.sum / s.total)
}
