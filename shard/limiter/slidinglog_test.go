package limiter

import "testing"

func TestSlidingLogTable(t *testing.T) {
	runTable(t, Rule{Algorithm: SlidingLog, Limit: 3, Period: sec}, []row{
		{at: t0, hits: 1, allowed: true, remaining: 2, reset: sec},
		{at: t0 + 300*ms, hits: 2, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 500*ms, hits: 1, remaining: 0, retry: 500 * ms, reset: 800 * ms},
		{at: t0 + sec, hits: 1, allowed: true, remaining: 0, reset: sec}, // t0 has left
		{at: t0 + sec, hits: 2, remaining: 0, retry: 300 * ms, reset: sec},
		{at: t0 + 1300*ms, hits: 2, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 1300*ms, hits: 4, remaining: 0, retry: Never, reset: sec},
		{at: t0 + 5*sec, hits: 0, allowed: true, remaining: 3},
	})
}

func TestLogMove(t *testing.T) {
	r := Rule{Algorithm: SlidingLog, Limit: 4, Period: sec}
	l := Log{Times: make([]int64, 4)}
	for i := range int64(6) { // wraps the ring
		DecideLog(&l, t0+i*300*ms, &r, 1, 1)
	}
	// Entries at 600, 900, 1200 and 1500 ms; shrinking to 2 keeps the newest.
	l.Move(make([]int64, 2))
	if l.Len != 2 || l.Head != 0 || l.Times[0] != t0+1200*ms || l.Times[1] != t0+1500*ms {
		t.Fatalf("after Move to 2: %+v", l)
	}
	r.Limit = 2
	if d := DecideLog(&l, t0+1600*ms, &r, 1, 1); d.Allowed || d.RetryAfter != 600*ms {
		t.Fatalf("after Move: %+v, want denied until the 1200 ms entry leaves", d)
	}
	l.Move(make([]int64, 8))
	if l.Len != 2 || len(l.Times) != 8 {
		t.Fatalf("after Move to 8: %+v", l)
	}
}

func TestLogShortRing(t *testing.T) {
	// A ring its owner could not grow denies the hits that do not fit
	// until entries leave it; the decision reports the rule's limit.
	r := Rule{Algorithm: SlidingLog, Limit: 10, Period: sec}
	l := Log{Times: make([]int64, 2)}
	if d := DecideLog(&l, t0, &r, 2, 1); !d.Allowed || d.Limit != 10 || d.Remaining != 8 {
		t.Fatalf("%+v", d)
	}
	if d := DecideLog(&l, t0+100*ms, &r, 1, 1); d.Allowed || d.RetryAfter != 900*ms || d.Limit != 10 {
		t.Fatalf("ring full: %+v, want denied until the oldest entry leaves", d)
	}
	if d := DecideLog(&l, t0, &r, 3, 1); d.Allowed || d.RetryAfter != Never {
		t.Fatalf("more hits than the ring holds: %+v", d)
	}
	// Grown, the same ring admits up to the limit.
	if got := l.Live(t0+100*ms, &r); got != 2 {
		t.Fatalf("Live = %d, want 2", got)
	}
	l.Move(make([]int64, 16))
	if d := DecideLog(&l, t0+100*ms, &r, 8, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after growing: %+v", d)
	}
	if got := l.Live(t0+sec, &r); got != 8 {
		t.Fatalf("Live a period later = %d, want the 8 entries of 100 ms", got)
	}
	// A ring left inconsistent by its owner starts afresh instead of panicking.
	l.Head, l.Len = 50, 90
	if d := DecideLog(&l, t0, &r, 1, 1); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("%+v", d)
	}
}
