package client

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// backoff returns the sleep before retry number retry (0 for the first
// retry): full jitter, a uniform draw from [0, min(max, base·2^retry)].
// rnd(n) must return a value in [0, n).
func backoff(base, max time.Duration, retry int, rnd func(n int64) int64) time.Duration {
	ceiling := max
	if retry < 62 && base <= max>>retry {
		ceiling = base << retry
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rnd(int64(ceiling) + 1))
}

// retryable reports whether a failed attempt may be sent again: only when
// it failed with UNAVAILABLE and gRPC never opened a stream for it, so the
// request was never written to any connection and no router's handler can
// have seen it (connection refused, TLS handshake failure, no address
// resolved). Once a stream is open the request may have been read and
// counted, whatever the status; DEADLINE_EXCEEDED and every other code are
// never retried.
func retryable(err error, t *tracker) bool {
	return status.Code(err) == codes.Unavailable && !t.streamed.Load()
}

// tracker records whether an RPC ever opened a stream on a connection. It
// travels in the RPC's context; streamHandler fills it in.
type tracker struct{ streamed atomic.Bool }

type trackerKey struct{}

func withTracker(ctx context.Context, t *tracker) context.Context {
	return context.WithValue(ctx, trackerKey{}, t)
}

// streamHandler is a gRPC stats handler that marks an RPC's tracker when a
// stream is created for it on a transport: gRPC reports OutHeader right
// after creating the stream and before any message can be written, so an
// RPC with no OutHeader never sent its request.
type streamHandler struct{}

func (streamHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (streamHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutHeader); !ok {
		return
	}
	if t, ok := ctx.Value(trackerKey{}).(*tracker); ok {
		t.streamed.Store(true)
	}
}

func (streamHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (streamHandler) HandleConn(context.Context, stats.ConnStats) {}

// sleep waits d or until ctx is done; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
