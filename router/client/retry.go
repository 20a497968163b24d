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

// Why an attempt may be sent again, the retry metric's reason label.
const (
	retryNotSent = "not_sent"
	retryLost    = "connection_lost"
)

// retryable says whether a failed attempt may be sent again, and why ("" when
// not):
//
//   - not_sent: it failed with UNAVAILABLE and gRPC never opened a stream
//     for it, so the request was never written to any connection and no
//     router's handler can have seen it (connection refused, TLS handshake
//     failure, no address resolved). Safe as often as MaxAttempts allows.
//   - connection_lost: it failed with UNAVAILABLE after its stream opened,
//     but no router sent a status: the connection broke under it, as when
//     its router is killed (before it answered, or while its answer was on
//     the way: headers without a status are no answer). The router
//     may have counted it before dying, so the caller retries it once only:
//     a check counted twice errs toward denying, never past a limit.
//
// A status the router sent (any code, UNAVAILABLE included) and
// DEADLINE_EXCEEDED are never retried.
func retryable(err error, t *tracker) string {
	switch {
	case status.Code(err) != codes.Unavailable:
		return ""
	case !t.streamed.Load():
		return retryNotSent
	case !t.answered.Load():
		return retryLost
	}
	return ""
}

// tracker records whether an RPC ever opened a stream on a connection, and
// whether a router answered on it (a status, in the trailers). It travels in the
// RPC's context; streamHandler fills it in.
type tracker struct{ streamed, answered atomic.Bool }

type trackerKey struct{}

func withTracker(ctx context.Context, t *tracker) context.Context {
	return context.WithValue(ctx, trackerKey{}, t)
}

// streamHandler is a gRPC stats handler that marks an RPC's tracker when a
// stream is created for it on a transport, and when the server answers on
// it. gRPC reports OutHeader right after creating the stream and before
// any message can be written, so an RPC with no OutHeader never sent its
// request; it reports InTrailer when the server's status arrives, before
// the RPC returns, so an UNAVAILABLE RPC without it failed with no status
// from the server: its connection broke, even if the response's headers
// had arrived.
type streamHandler struct{}

func (streamHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (streamHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	t, ok := ctx.Value(trackerKey{}).(*tracker)
	if !ok {
		return
	}
	switch s.(type) {
	case *stats.OutHeader:
		t.streamed.Store(true)
	case *stats.InTrailer:
		t.answered.Store(true)
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
