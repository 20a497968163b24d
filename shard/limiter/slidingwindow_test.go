package limiter

import "testing"

func TestSlidingWindowTable(t *testing.T) {
	runTable(t, Rule{Algorithm: SlidingWindow, Limit: 10, Period: sec}, []row{
		{at: t0, hits: 10, allowed: true, remaining: 0, reset: 2 * sec},
		// 10 in this window: wait for the next, where they weigh 10·(1 − e)
		// and 1 more fits once e >= 0.1 s.
		{at: t0 + 500*ms, hits: 1, remaining: 0, retry: 600 * ms, reset: 1500 * ms},
		{at: t0 + 1100*ms, hits: 1, allowed: true, remaining: 0, reset: 1900 * ms},
		// 10·0.5 + 1 + 2 = 8.
		{at: t0 + 1500*ms, hits: 2, allowed: true, remaining: 2, reset: 1500 * ms},
		// 10·0.5 + 3 + 3 = 11: fits at e = 0.6 s, where 10·0.4 + 3 + 3 = 10.
		{at: t0 + 1500*ms, hits: 3, remaining: 2, retry: 100 * ms, reset: 1500 * ms},
		{at: t0 + 1600*ms, hits: 3, allowed: true, remaining: 0, reset: 1400 * ms},
		{at: t0 + 2*sec, hits: 0, allowed: true, remaining: 4, reset: sec}, // 6 weigh fully, then fade
		{at: t0 + 3500*ms, hits: 0, allowed: true, remaining: 10},
		{at: t0 + 3500*ms, hits: 11, remaining: 10, retry: Never},
	})
	// Weights that are no whole number of hits compare exactly:
	// 3 per 7 ms, 3 hits, then 1 more fits once 3·(7 − e)/7 <= 2,
	// that is e >= 7/3 ms, rounded up to the ns.
	runTable(t, Rule{Algorithm: SlidingWindow, Limit: 3, Period: 7 * ms}, []row{
		{at: 7 * ms * 1000, hits: 3, allowed: true, remaining: 0, reset: 14 * ms},
		{at: 7*ms*1001 + 2_333_333, hits: 1, remaining: 0, retry: 1, reset: 4_666_667},
		{at: 7*ms*1001 + 2_333_334, hits: 1, allowed: true, remaining: 0, reset: 11_666_666},
	})
}
