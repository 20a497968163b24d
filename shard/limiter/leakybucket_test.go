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
	// MaxDelay 0 queues nothing: one hit per 1/3 s, no burst.
	runTable(t, Rule{Algorithm: LeakyBucket, Limit: 3, Period: sec}, []row{
		{at: t0, hits: 1, allowed: true, remaining: 0, reset: 333_333_334},
		{at: t0, hits: 1, remaining: 0, retry: 333_333_334, reset: 333_333_334, delay: 333_333_334},
		{at: t0 + 333_333_334, hits: 1, allowed: true, remaining: 0, reset: 333_333_334},
		{at: t0 + 2*sec, hits: 3, allowed: true, remaining: 0, reset: sec},
		{at: t0 + 3*sec, hits: 1, allowed: true, remaining: 0, reset: 333_333_334},
	})
}
