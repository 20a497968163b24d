package router

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// streamInFlight bounds the messages of one CheckStream decided at once.
// Past it the handler holds one more message waiting for a slot and its
// reader one more it has read, so a stream has at most streamInFlight+2
// messages read and unanswered; then it reads no more until one is
// answered, and gRPC's flow control holds the caller back.
const streamInFlight = 8

// spanStreamMessage is the span of one traced CheckStream message, the
// stream's counterpart of a unary Check's gRPC server span.
const spanStreamMessage = "shardlimit.v1.RateLimiter/CheckStream.message"

// streamAge is how long a CheckStream lives before the router ends it as
// a stop does: half the connection's MaxConnectionAgeGrace. A connection
// past its MaxConnectionAge refuses new streams and is closed a grace
// later, cutting the streams still open; a stream opened before that
// point ends cleanly well before the close, and its caller opens the next
// one on a new connection.
func streamAge(grace time.Duration) time.Duration { return grace / 2 }

// streamMessage is a message the reader hands to the handler: a request
// to decide, or one to answer with refused (a status) without deciding.
type streamMessage struct {
	req     *shardlimitv1.CheckStreamRequest
	refused error
}

// CheckStream implements the public API's stream: each message is decided
// by Check, as a unary request of the same checks, and answered with its
// id when decided, so answers may pass each other. A message Check would
// reject, or one that does not decode (invalid UTF-8, say) but whose id
// can be read, is answered with the status's code and message; the stream
// goes on. The caller is identified again for each message against the
// grants in force (auth.Caller.Current): a message of a caller whose
// grant was revoked or whose token expired is answered with the refusal,
// and the stream ends with it after the messages read before are answered.
//
// The stream ends when the caller closes its side, or when the router
// stops or the stream reaches its age (streamAge): then it answers every
// message it has read and ends with OK, so a message left unanswered by a
// stream that ended with OK was never decided, and the caller may send it
// again elsewhere. When an answer cannot be sent, the stream ends with
// that error.
func (r *Router) CheckStream(stream grpc.BidiStreamingServer[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]) error {
	ctx := stream.Context()
	caller := auth.FromContext(ctx)
	var (
		wg         sync.WaitGroup
		sendMu     sync.Mutex
		broken     error                 // the first Send error: the stream is gone
		sendFailed = make(chan struct{}) // closed when broken is set
	)
	defer wg.Wait() // Send is not allowed once the handler returns
	// Recv runs on a goroutine of its own so that a stop does not wait for
	// the caller's next message; a message it reads after the handler
	// stopped reading is dropped undecided.
	quit := make(chan struct{}) // closed when the handler stops reading
	defer close(quit)
	msgs, recvErr := make(chan streamMessage), make(chan error, 1)
	go func() {
		for {
			m, err := recvMessage(stream)
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-quit:
				return
			}
		}
	}()
	age := time.NewTimer(streamAge(r.opts.Limits.MaxConnectionAgeGrace))
	defer age.Stop()
	answer := func(resp *shardlimitv1.CheckStreamResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if broken != nil {
			return
		}
		if broken = stream.Send(resp); broken != nil {
			close(sendFailed)
		}
	}
	sendErr := func() error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if _, ok := status.FromError(broken); ok {
			return broken
		}
		return status.Error(codes.Unavailable, broken.Error())
	}
	slots := make(chan struct{}, streamInFlight)
	mctx := ctx // the context messages are decided in: the caller's
	for {
		var m streamMessage
		select {
		case m = <-msgs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-sendFailed:
			return sendErr()
		case <-r.draining:
			return nil
		case <-age.C:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		if m.refused != nil {
			answer(refusal(m.req.Id, m.refused))
			continue
		}
		cur, err := caller.Current(ctx)
		if err != nil {
			answer(refusal(m.req.Id, err))
			return err
		}
		if cur != caller {
			caller, mctx = cur, auth.WithCaller(ctx, cur)
		}
		select {
		case slots <- struct{}{}:
		case <-sendFailed:
			return sendErr()
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		wg.Go(func() {
			defer func() { <-slots }()
			answer(r.checkMessage(mctx, m.req))
		})
	}
}

// recvMessage reads one CheckStream message. It decodes the message
// itself, so that a message that does not decode (invalid UTF-8 in a
// string, which gRPC's codec refuses as a broken stream) is answered by
// its id with INVALID_ARGUMENT and the stream goes on; a message whose id
// cannot be read ends the stream. The strings of its checks are checked
// for UTF-8 by Check's validation, naming the field.
func recvMessage(stream grpc.BidiStreamingServer[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]) (streamMessage, error) {
	var raw emptypb.Empty // keeps every field as unknown bytes, unvalidated
	if err := stream.RecvMsg(&raw); err != nil {
		return streamMessage{}, err
	}
	req := &shardlimitv1.CheckStreamRequest{}
	if err := req.UnmarshalVT(raw.ProtoReflect().GetUnknown()); err != nil {
		if req.Id == 0 {
			return streamMessage{}, status.Errorf(codes.InvalidArgument, "message: %v", err)
		}
		return streamMessage{req: req, refused: status.Errorf(codes.InvalidArgument, "message: %v", err)}, nil
	}
	for k, v := range req.TraceContext {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return streamMessage{req: req, refused: status.Error(codes.InvalidArgument, "trace_context: invalid UTF-8")}, nil
		}
	}
	return streamMessage{req: req}, nil
}

// refusal is the answer to message id that err refused undecided.
func refusal(id uint64, err error) *shardlimitv1.CheckStreamResponse {
	st := status.Convert(err)
	return &shardlimitv1.CheckStreamResponse{Id: id, Code: int32(st.Code()), Message: st.Message()}
}

// checkMessage decides one CheckStream message.
func (r *Router) checkMessage(ctx context.Context, req *shardlimitv1.CheckStreamRequest) *shardlimitv1.CheckStreamResponse {
	var span trace.Span
	if r.tracer != nil && len(req.TraceContext) > 0 {
		ctx, span = r.tracer.Start(tracing.Extract(ctx, req.TraceContext), spanStreamMessage,
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.Int64("shardlimit.message_id", int64(req.Id))))
	}
	r.metrics.streamChecks.Observe(float64(len(req.Checks)))
	resp, err := r.Check(ctx, &shardlimitv1.CheckRequest{Checks: req.Checks})
	if span != nil {
		tracing.End(span, err)
	}
	if err != nil {
		return refusal(req.Id, err)
	}
	return &shardlimitv1.CheckStreamResponse{Id: req.Id, Decisions: resp.Decisions}
}
