package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsCoverValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(v uint64) {
		b := bucketOf(v)
		if b < 0 || b >= numBucket {
			t.Fatalf("bucketOf(%d) = %d out of range", v, b)
		}
		lo, hi := bucketRange(b)
		if v < 1<<maxExp && (v < lo || v >= hi) {
			t.Fatalf("%d in bucket %d = [%d, %d)", v, b, lo, hi)
		}
		if lo >= subCount && float64(hi-lo)/2 > QuantileErrorBound*float64(lo) {
			t.Fatalf("bucket [%d, %d) wider than the error bound allows", lo, hi)
		}
	}
	for v := range uint64(5000) {
		check(v)
	}
	for range 100_000 {
		check(rng.Uint64N(1 << maxExp))
	}
	check(1<<maxExp - 1)
	check(1 << 62)
	for b := 1; b < numBucket; b++ {
		_, prevHi := bucketRange(b - 1)
		if lo, _ := bucketRange(b); lo != prevHi {
			t.Fatalf("bucket %d starts at %d, the previous ends at %d", b, lo, prevHi)
		}
	}
}

func TestQuantilesWithinBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h histogram
	vals := make([]time.Duration, 100_000)
	for i := range vals {
		// Log-normal-ish latencies from 20 µs to a few hundred ms.
		vals[i] = time.Duration(20_000 * (1 + rng.ExpFloat64()*rng.ExpFloat64()*50))
		h.record(vals[i])
	}
	slices.Sort(vals)
	var s snapshot
	s.add(&h)
	if s.total != uint64(len(vals)) {
		t.Fatalf("total %d; want %d", s.total, len(vals))
	}
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := vals[max(int(float64(len(vals))*q+0.999999)-1, 0)]
		got := s.quantile(q)
		if diff := float64(got-want) / float64(want); diff > QuantileErrorBound || diff < -QuantileErrorBound {
			t.Errorf("q%v = %v; exact %v (error %.4f > %.4f)", q, got, want, diff, QuantileErrorBound)
		}
	}
	if s.quantile(1) > vals[len(vals)-1] {
		t.Errorf("max quantile %v above the largest value %v", s.quantile(1), vals[len(vals)-1])
	}
	var empty snapshot
	if empty.quantile(0.99) != 0 {
		t.Error("empty histogram has a quantile")
	}
	// minus: the values recorded since a snapshot.
	prev := s
	for range 10 {
		h.record(time.Second)
	}
	var cur snapshot
	cur.add(&h)
	d := cur.minus(&prev)
	if d.total != 10 || d.quantile(0.5) < time.Second*99/100 || d.quantile(0.5) > time.Second*101/100 {
		t.Errorf("difference: %d values, median %v; want 10 around 1s", d.total, d.quantile(0.5))
	}
}
