package limiter

import (
	"testing"
	"time"
)

func TestTokenBucketTable(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000_000)
	sec := int64(time.Second)
	rule := Rule{Algorithm: TokenBucket, Limit: 3, Period: sec}
	steps := []struct {
		at        int64
		hits      int64
		allowed   bool
		remaining int64
		retry     int64
	}{
		{t0, 1, true, 2, 0},
		{t0, 2, true, 0, 0},
		{t0, 1, false, 0, 333_333_334},    // one token back after 1/3 s, rounded up
		{t0 + 333_333_334, 1, true, 0, 0}, // waiting exactly retry_after is enough
		{t0 + 333_333_334, 0, true, 0, 0}, // a read consumes nothing
		{t0 + 2*sec, 4, false, 3, Never},  // more than the capacity is never allowed
		{t0 + 2*sec, 3, true, 0, 0},       // the bucket refilled in full
		{t0 + 2*sec + sec/2, 2, false, 1, 166_666_667},
	}
	var s State
	for i, st := range steps {
		d := Decide(&s, st.at, &rule, st.hits)
		if d.Allowed != st.allowed || d.Remaining != st.remaining || d.RetryAfter != st.retry {
			t.Fatalf("step %d (t0+%v, hits %d): got allowed=%v remaining=%d retry=%d, want %v %d %d",
				i, time.Duration(st.at-t0), st.hits, d.Allowed, d.Remaining, d.RetryAfter, st.allowed, st.remaining, st.retry)
		}
	}
}

func TestTokenBucketExactOverPeriods(t *testing.T) {
	// Hitting as fast as allowed for 100 periods admits exactly
	// capacity + 100·limit, whatever the rounding of period/limit.
	rule := Rule{Algorithm: TokenBucket, Limit: 7, Period: int64(time.Second)}
	var s State
	now, end := int64(0), 100*int64(time.Second)
	allowed := int64(0)
	for now <= end {
		d := Decide(&s, now, &rule, 1)
		if d.Allowed {
			allowed++
			continue
		}
		now += d.RetryAfter
	}
	if want := rule.Capacity() + 100*rule.Limit; allowed != want {
		t.Fatalf("allowed %d, want %d", allowed, want)
	}
}
