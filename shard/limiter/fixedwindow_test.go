package limiter

import "testing"

func TestFixedWindowTable(t *testing.T) {
	runTable(t, Rule{Algorithm: FixedWindow, Limit: 3, Period: sec}, []row{
		{at: t0 + 200*ms, hits: 2, allowed: true, remaining: 1, reset: 800 * ms},
		{at: t0 + 500*ms, hits: 2, remaining: 1, retry: 500 * ms, reset: 500 * ms},
		{at: t0 + 500*ms, hits: 1, allowed: true, remaining: 0, reset: 500 * ms},
		{at: t0 + sec - 1, hits: 1, remaining: 0, retry: 1, reset: 1},
		{at: t0 + sec, hits: 3, allowed: true, remaining: 0, reset: sec}, // a new window
		{at: t0 + sec, hits: 4, remaining: 0, retry: Never, reset: sec},
		{at: t0 + 2*sec + 1, hits: 0, allowed: true, remaining: 3},
	})
	// Windows are aligned on the epoch, not on the first hit.
	runTable(t, Rule{Algorithm: FixedWindow, Limit: 1, Period: 7 * ms}, []row{
		{at: 7*ms*1000 + 5*ms, hits: 1, allowed: true, remaining: 0, reset: 2 * ms},
		{at: 7*ms*1000 + 6*ms, hits: 1, remaining: 0, retry: ms, reset: ms},
		{at: 7 * ms * 1001, hits: 1, allowed: true, remaining: 0, reset: 7 * ms},
	})
}
