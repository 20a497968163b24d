package limiter

import "testing"

func TestLeakyBucketTable(t *testing.T) {
	// A queue of 3 draining one hit every 500 ms; a caller waits up to 1 s.
	runTable(t, Rule{Algorithm: LeakyBucket, Limit: 2, Period: sec, Burst: 3, MaxDelay: sec}, []row{
		{at: t0, hits: 1, allowed: true, remaining: 2, reset: 500 * ms},
		{at: t0, hits: 1, allowed: true, remaining: 1, reset: sec, delay: 500 * ms},
		{at: t0, hits: 1, allowed: true, remaining: 0, reset: 1500 * ms, delay: sec},
		// The queue is full and the wait would be 1.5 s: both clear in 500 ms.
		{at: t0, hits: 1, remaining: 0, retry: 500 * ms, reset: 1500 * ms, delay: 1500 * ms},
		{at: t0 + 500*ms, hits: 1, allowed: true, remaining: 0, reset: 1500 * ms, delay: sec},
		{at: t0 + 500*ms, hits: 4, remaining: 0, retry: Never, reset: 1500 * ms, delay: 1500 * ms},
		{at: t0 + 5*sec, hits: 3, allowed: true, remaining: 0, reset: 1500 * ms},
		{at: t0 + 5*sec, hits: 0, allowed: true, remaining: 0, reset: 1500 * ms, delay: 1500 * ms},
		{at: t0 + 7*sec, hits: 0, allowed: true, remaining: 3},
	})
	// The default (no MaxDelay): a queue of Burst = Limit = 10 draining one
	// hit every 200 ms (limit 10 per 2 s). Ten requests at once all fit,
	// each told to wait 200 ms more than the one before; the 11th does not
	// fit and may retry when the first has drained, 200 ms later.
	r := Rule{Algorithm: LeakyBucket, Limit: 10, Period: 2 * sec}
	var burst []row
	for i := range int64(10) {
		burst = append(burst, row{at: t0, hits: 1, allowed: true, remaining: 9 - i, reset: (i + 1) * 200 * ms, delay: i * 200 * ms})
	}
	runTable(t, r, append(burst,
		row{at: t0, hits: 1, remaining: 0, retry: 200 * ms, reset: 2 * sec, delay: 2 * sec},
		row{at: t0 + 199*ms, hits: 1, remaining: 0, retry: ms, reset: 1801 * ms, delay: 1801 * ms},
		row{at: t0 + 200*ms, hits: 1, allowed: true, remaining: 0, reset: 2 * sec, delay: 1800 * ms},
		// 2 hits need two free places: 400 ms after the queue was full.
		row{at: t0 + 300*ms, hits: 2, remaining: 0, retry: 300 * ms, reset: 1900 * ms, delay: 1900 * ms},
		row{at: t0 + 600*ms, hits: 2, allowed: true, remaining: 0, reset: 2 * sec, delay: 1600 * ms},
		row{at: t0 + 600*ms, hits: 11, remaining: 0, retry: Never, reset: 2 * sec, delay: 2 * sec},
		row{at: t0 + 2600*ms, hits: 0, allowed: true, remaining: 10},
	))
	// A queue of one never waits: one hit per 1/3 s, no burst.
	runTable(t, Rule{Algorithm: LeakyBucket, Limit: 3, Period: sec, Burst: 1}, []row{
		{at: t0, hits: 1, allowed: true, remaining: 0, reset: 333_333_334},
		{at: t0, hits: 1, remaining: 0, retry: 333_333_334, reset: 333_333_334, delay: 333_333_334},
		{at: t0 + 333_333_334, hits: 1, allowed: true, remaining: 0, reset: 333_333_334},
		{at: t0 + 2*sec, hits: 2, remaining: 1, retry: Never},
		{at: t0 + 3*sec, hits: 1, allowed: true, remaining: 0, reset: 333_333_334},
	})
}
