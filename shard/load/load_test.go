package load

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// t0 is the explicit start of the tests: a whole bucket since the epoch.
const t0 = int64(1_700_000_000_000_000_000)

const sec = int64(time.Second)

func TestNewPanicsOnBadCount(t *testing.T) {
	for _, n := range []int{-1, 0, MaxPartitions + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", n)
				}
			}()
			New(n)
		}()
	}
	if got := New(MaxPartitions).Partitions(); got != MaxPartitions {
		t.Fatalf("Partitions() = %d, want %d", got, MaxPartitions)
	}
}

// TestWindow drives one partition through a table of (add at, n) and
// (snapshot at, want) rows.
func TestWindow(t *testing.T) {
	type op struct {
		at   int64 // offset from t0
		add  uint64
		snap bool
		want uint64
	}
	add := func(at int64, n uint64) op { return op{at: at, add: n} }
	snap := func(at int64, want uint64) op { return op{at: at, snap: true, want: want} }
	cases := []struct {
		name string
		ops  []op
	}{
		{"empty", []op{snap(0, 0), snap(100*sec, 0)}},
		{"same bucket", []op{add(0, 5), add(9*sec, 3), snap(9*sec, 8)}},
		{"whole minute", []op{
			add(0, 10), add(10*sec, 10), add(20*sec, 10), add(30*sec, 10), add(40*sec, 10), add(50*sec, 10),
			// at t0+59s: buckets 0..5 all inside; bucket 0 is not yet the oldest
			snap(59*sec, 60),
			// at t0+60s: bucket 0 is the oldest, weighted 10/10
			snap(60*sec, 60),
			// at t0+65s: bucket 0 weighted 5/10
			snap(65*sec, 55),
			// at t0+69.999s: bucket 0 weighted 1ms/10s → 0
			snap(70*sec-int64(time.Millisecond), 50),
			// at t0+70s: bucket 0 is outside, bucket 1 weighted 10/10
			snap(70*sec, 50),
			snap(115*sec, 5),
			snap(120*sec, 0),
		}},
		{"steady rate is exact", func() []op {
			// One hit a second: half a second after any hit from the
			// 60th on, the last minute holds exactly 60.
			var ops []op
			for s := int64(0); s < 200; s++ {
				ops = append(ops, add(s*sec, 1))
				if s >= 59 {
					ops = append(ops, snap(s*sec+sec/2, 60))
				}
			}
			return ops
		}()},
		{"slot reused after a gap", []op{
			add(0, 7),
			// 70 s later the same slot holds a new bucket: the old 7 are gone
			add(70*sec, 1),
			snap(70*sec, 1),
		}},
		{"late add to a reused slot is dropped", []op{
			add(70*sec, 1),
			add(0, 7), // slot already holds the bucket of t0+70s
			snap(70*sec, 1),
			snap(0, 0),
		}},
		{"snapshot in the past ignores newer buckets", []op{
			add(0, 1), add(30*sec, 2),
			snap(15*sec, 1),
		}},
		{"negative time", []op{add(-5*sec-t0, 4), snap(-t0, 4), snap(-5*sec-t0, 4)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := New(4)
			for i, o := range c.ops {
				if !o.snap {
					l.Add(2, t0+o.at, o.add)
					continue
				}
				got := l.Snapshot(t0 + o.at)
				if got[2] != o.want || got[0]+got[1]+got[3] != 0 {
					t.Fatalf("op %d: Snapshot(t0%+v) = %v, want [0 0 %d 0]", i, time.Duration(o.at), got, o.want)
				}
			}
		})
	}
}

// TestErrorBound checks the documented bound against an exact count: for
// any arrival pattern, |Snapshot − exact| ≤ the count of one bucket.
func TestErrorBound(t *testing.T) {
	l := New(1)
	var at []int64
	// bursty arrivals: runs of hits at irregular times over 3 minutes,
	// with a snapshot checked after each run from the second minute on
	x := uint64(12345)
	for now := t0; now < t0+180*sec; {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		now += int64(x % uint64(3*sec))
		for range x % 5 {
			l.Add(0, now, 1)
			at = append(at, now)
		}
		if now < t0+60*sec {
			continue
		}
		exact, worst := uint64(0), uint64(0)
		perBucket := map[int64]uint64{}
		for _, a := range at {
			if a >= now-Window && a <= now {
				exact++
			}
			perBucket[numberOf(a)]++
		}
		for _, n := range perBucket {
			worst = max(worst, n)
		}
		got := l.Snapshot(now)[0]
		diff := max(got, exact) - min(got, exact)
		if diff > worst {
			t.Fatalf("at t0+%v: Snapshot %d, exact %d: error %d over one bucket's %d", time.Duration(now-t0), got, exact, diff, worst)
		}
	}
}

func TestOutOfRange(t *testing.T) {
	l := New(3)
	for _, p := range []int{-1, 3, 1 << 20, -1 << 40} {
		l.Add(p, t0, 2)
	}
	l.Add(0, t0, 1)
	if got := l.Snapshot(t0); !slices.Equal(got, []uint64{1, 0, 0}) {
		t.Fatalf("Snapshot = %v, want [1 0 0]", got)
	}
	if got := l.Other(t0); got != 8 {
		t.Fatalf("Other = %d, want 8", got)
	}
	if got := l.Other(t0 + 2*Window); got != 0 {
		t.Fatalf("Other a window later = %d, want 0", got)
	}
}

func TestAddAllocatesNothing(t *testing.T) {
	l := New(1024)
	l.Add(0, t0, 1) // starts the bucket
	now := t0
	allocs := testing.AllocsPerRun(1000, func() {
		now += int64(time.Microsecond)
		l.Add(int(now%1024), now, 1)
	})
	if allocs != 0 {
		t.Fatalf("Add allocates %.1f times", allocs)
	}
	// Starting a bucket allocates it, once.
	if allocs := testing.AllocsPerRun(1, func() { now += Bucket; l.Add(0, now, 1) }); allocs != 2 {
		t.Fatalf("a new bucket costs %.1f allocations, want 2 (the bucket and its counts)", allocs)
	}
}

// TestConcurrent runs writers across bucket boundaries with a reader, under
// -race: no count is lost while time stays within one window.
func TestConcurrent(t *testing.T) {
	const writers, per, parts = 4, 20000, 64
	l := New(parts)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := l.Snapshot(t0 + 50*sec)
			if len(s) != parts {
				t.Errorf("Snapshot has %d partitions", len(s))
				return
			}
		}
	}()
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				// times spread over 50 s: five bucket rotations race
				l.Add((i+w)%(parts+1), t0+int64(i)*(50*sec/per), 1)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-done
	var total uint64
	for _, v := range l.Snapshot(t0 + 50*sec) {
		total += v
	}
	total += l.Other(t0 + 50*sec)
	if total != writers*per {
		t.Fatalf("total %d, want %d", total, writers*per)
	}
}
