package client

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Full jitter: retry k sleeps a uniform draw from [0, min(max, base·2^k)];
// the injected source sees exactly that ceiling + 1 as its bound.
func TestBackoffFullJitterBounds(t *testing.T) {
	const base, max = 2 * time.Millisecond, 20 * time.Millisecond
	ceilings := []time.Duration{2, 4, 8, 16, 20, 20, 20}
	for retry, want := range ceilings {
		want *= time.Millisecond
		var bound int64
		top := backoff(base, max, retry, func(n int64) int64 { bound = n; return n - 1 })
		if bound != int64(want)+1 || top != want {
			t.Errorf("retry %d: source bound %d, top draw %v; want bound %d, top %v", retry, bound, top, int64(want)+1, want)
		}
		if low := backoff(base, max, retry, func(int64) int64 { return 0 }); low != 0 {
			t.Errorf("retry %d: lowest draw %v, want 0", retry, low)
		}
	}
	for _, retry := range []int{62, 63, 64, 1000} { // no overflow of base·2^retry
		if got := backoff(base, max, retry, func(n int64) int64 { return n - 1 }); got != max {
			t.Errorf("retry %d: top draw %v, want the cap %v", retry, got, max)
		}
	}
	for retry := range 6 {
		ceiling := min(max, base<<retry)
		for range 2000 {
			if d := backoff(base, max, retry, rand.Int64N); d < 0 || d > ceiling {
				t.Fatalf("retry %d: %v outside [0, %v]", retry, d, ceiling)
			}
		}
	}
}

// UNAVAILABLE before any stream was opened is retried as not sent;
// UNAVAILABLE after the stream opened, with no answer from the router, as
// lost with its connection; nothing else.
func TestRetryable(t *testing.T) {
	streamed := &tracker{}
	streamed.streamed.Store(true)
	answered := &tracker{}
	answered.streamed.Store(true)
	answered.answered.Store(true)
	for _, c := range []struct {
		name string
		err  error
		t    *tracker
		want string
	}{
		{"unavailable, never sent", status.Error(codes.Unavailable, "connection refused"), &tracker{}, retryNotSent},
		{"unavailable after a stream opened, no answer", status.Error(codes.Unavailable, "error reading from server: EOF"), streamed, retryLost},
		{"unavailable from the router itself", status.Error(codes.Unavailable, "stopping"), answered, ""},
		{"deadline exceeded, never sent", status.Error(codes.DeadlineExceeded, "deadline"), &tracker{}, ""},
		{"deadline exceeded", status.Error(codes.DeadlineExceeded, "deadline"), streamed, ""},
		{"internal", status.Error(codes.Internal, "boom"), &tracker{}, ""},
		{"resource exhausted", status.Error(codes.ResourceExhausted, "busy"), &tracker{}, ""},
		{"invalid argument", status.Error(codes.InvalidArgument, "bad"), &tracker{}, ""},
		{"not a status", errors.New("plain"), &tracker{}, ""},
	} {
		if got := retryable(c.err, c.t); got != c.want {
			t.Errorf("%s: retryable %q, want %q", c.name, got, c.want)
		}
	}
}
