package router

import (
	"context"
	"errors"
	"io"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// streamInFlight bounds the messages of one CheckStream decided at once;
// past it the stream reads no more until one is answered, and gRPC's flow
// control holds the caller back.
const streamInFlight = 8

// spanStreamMessage is the span of one traced CheckStream message, the
// stream's counterpart of a unary Check's gRPC server span.
const spanStreamMessage = "shardlimit.v1.RateLimiter/CheckStream.message"

// CheckStream implements the public API's stream: each message is decided
// by Check, as a unary request of the same checks, and answered with its
// id when decided, so answers may pass each other. A message Check would
// reject is answered with the status's code and message; the stream goes
// on. The stream ends when the caller closes its side, or when the router
// stops: then it answers every message it has read and ends with OK, so a
// message left unanswered by a stream that ended with OK was never
// decided, and the caller may send it again elsewhere.
func (r *Router) CheckStream(stream grpc.BidiStreamingServer[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]) error {
	ctx := stream.Context()
	var (
		wg     sync.WaitGroup
		sendMu sync.Mutex
		broken error // the first Send error: the stream is gone
	)
	defer wg.Wait() // Send is not allowed once the handler returns
	// Recv runs on a goroutine of its own so that a stop does not wait for
	// the caller's next message; a message it reads after the stop began
	// is dropped undecided.
	msgs, recvErr := make(chan *shardlimitv1.CheckStreamRequest), make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- req:
			case <-ctx.Done():
				return
			case <-r.draining:
				return
			}
		}
	}()
	slots := make(chan struct{}, streamInFlight)
	for {
		var req *shardlimitv1.CheckStreamRequest
		select {
		case req = <-msgs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-r.draining:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		wg.Go(func() {
			defer func() { <-slots }()
			resp := r.checkMessage(ctx, req)
			sendMu.Lock()
			defer sendMu.Unlock()
			if broken == nil {
				broken = stream.Send(resp)
			}
		})
	}
}

// checkMessage decides one CheckStream message.
func (r *Router) checkMessage(ctx context.Context, req *shardlimitv1.CheckStreamRequest) *shardlimitv1.CheckStreamResponse {
	var span trace.Span
	if r.tracer != nil && len(req.TraceContext) > 0 {
		ctx, span = r.tracer.Start(tracing.Extract(ctx, req.TraceContext), spanStreamMessage,
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.Int64("shardlimit.message_id", int64(req.Id))))
	}
	resp, err := r.Check(ctx, &shardlimitv1.CheckRequest{Checks: req.Checks})
	if span != nil {
		tracing.End(span, err)
	}
	out := &shardlimitv1.CheckStreamResponse{Id: req.Id}
	if err != nil {
		st := status.Convert(err)
		out.Code, out.Message = int32(st.Code()), st.Message()
		return out
	}
	out.Decisions = resp.Decisions
	return out
}
