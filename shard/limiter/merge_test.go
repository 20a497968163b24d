package limiter

import (
	"fmt"
	"testing"
	"time"
)

// Merging keeps the state that admits fewer hits: a key copied onto a shard
// that already counted some of its hits never gains quota.
func TestMergeKeepsTheMoreRestrictiveState(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000_000)
	for _, alg := range []Algorithm{TokenBucket, GCRA, LeakyBucket, FixedWindow, SlidingWindow} {
		r := Rule{Algorithm: alg, Limit: 10, Period: int64(time.Minute), Burst: 10}
		var few, many State
		for range 2 {
			Decide(&few, t0, &r, 1)
		}
		for range 7 {
			Decide(&many, t0, &r, 1)
		}
		for _, m := range []State{Merge(alg, few, many), Merge(alg, many, few)} {
			got := Decide(&m, t0, &r, 0).Remaining
			want := Decide(&many, t0, &r, 0).Remaining
			if got != want {
				t.Errorf("%v: merged remaining %d, want %d (the more used state)", alg, got, want)
			}
		}
	}
}

func TestMergeLogKeepsNewestOfUnion(t *testing.T) {
	l := Log{Times: make([]int64, 4)}
	r := Rule{Algorithm: SlidingLog, Limit: 4, Period: 100}
	DecideLog(&l, 10, &r, 1, 1)
	DecideLog(&l, 30, &r, 1, 1)
	MergeLog(&l, []int64{20, 40, 50})
	if got := l.Snapshot(); len(got) != 4 || got[0] != 20 || got[3] != 50 {
		t.Fatalf("merged log %v, want [20 30 40 50]", got)
	}
}

// A hand-off copies a key twice: merging a log into a copy of itself, or
// into a log that already holds some of its hits, counts each hit once,
// and a time hit twice (one check of cost 2) keeps both of its entries.
func TestMergeLogIsIdempotent(t *testing.T) {
	l := Log{Times: make([]int64, 8)}
	r := Rule{Algorithm: SlidingLog, Limit: 8, Period: 100}
	DecideLog(&l, 10, &r, 2, 1)
	DecideLog(&l, 30, &r, 1, 1)
	before := l.Snapshot()
	MergeLog(&l, before)
	MergeLog(&l, before[:2])
	if got := l.Snapshot(); fmt.Sprint(got) != "[10 10 30]" {
		t.Fatalf("merged a log into itself: %v, want [10 10 30]", got)
	}
	MergeLog(&l, []int64{10, 10, 10, 20})
	if got := l.Snapshot(); fmt.Sprint(got) != "[10 10 10 20 30]" {
		t.Fatalf("merged %v, want the time hit three times on one side three times", got)
	}
}
