package client

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	queue "github.com/shardlimit/shardlimit/router/batcher"
)

// Options.Stream: the single checks of concurrent Check and CheckOne calls
// travel over the routers' CheckStream. A batcher.Queue (the one the router
// coalesces its shard calls with) lets streamMessages messages be in flight
// at once: a check that finds a slot free leaves at once, in its caller's
// goroutine, after one yield to the goroutines ready to run (under load,
// other callers about to add their checks, which then share its message);
// checks that arrive while every slot is taken leave together in the next
// message, up to MaxBatch. An idle client adds no wait.
//
// One stream is open at a time, to the router pick chooses. A message is
// sent again, as a unary call would be (see retryable): when no stream
// could be opened (not sent), as often as MaxAttempts allows; when the
// stream broke before its answer (lost), once, on a new stream to the next
// router; when the router ended the stream cleanly (it stops), it promises
// that every message it left unanswered was never decided, so those are
// sent again as not sent. A router older than CheckStream answers it
// UNIMPLEMENTED: the client then sends its batches as unary Checks, and
// tries the stream again a minute later. A message whose deadline passes
// with nothing answered on the stream since it left drops the stream (the
// router is wedged): the next message opens another.

// traceContext is the W3C trace context of ctx's span, for the message
// that carries its check; nil when ctx's span is not sampled.
func traceContext(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, m)
	return m
}

// streamMessages is how many messages a client keeps in flight on its
// stream.
const streamMessages = 2

// errStreamEnded is the outcome of a message its router left unanswered
// when it ended the stream with OK: not decided, safe to send again.
var errStreamEnded = status.Error(codes.Unavailable, "the router ended the stream (stopping) before deciding the message")

type streamer struct {
	c      *Client
	queue  *queue.Queue[*waiter]
	ctx    context.Context // ends on Close: the streams' context
	cancel context.CancelFunc

	// unaryUntil (Unix ns) is set when a router refused the stream
	// itself UNIMPLEMENTED (a router older than CheckStream): batches go
	// as unary Checks until then, a minute later, when the stream is
	// tried again.
	unaryUntil atomic.Int64

	mu     sync.Mutex
	cur    *session // nil: none open
	nextID uint64
	closed bool

	// sentHook, when set (by tests only, before the first check), runs
	// after each message is written to its stream and before its answer
	// is waited for, so that a test can hold the wait until the stream
	// has ended.
	sentHook func(*session)
}

func newStreamer(c *Client) *streamer {
	s := &streamer{c: c}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.queue = queue.New(queue.Options{Calls: streamMessages, MaxCall: c.opts.MaxBatch, MaxWaiting: 100 * c.opts.MaxBatch},
		s.send, nil)
	return s
}

// add queues w and, when a slot is free, sends its message in the
// caller's goroutine. It reports false when too many checks wait already.
func (s *streamer) add(w *waiter) bool { return s.queue.Add(w, 0, 1, true) }

// close ends the stream; checks in flight get ErrClosed.
func (s *streamer) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
}

// unaryFor is how long batches go as unary Checks after a router refused
// the stream UNIMPLEMENTED, before the stream is tried again.
const unaryFor = time.Minute

// send decides ws in one message. A check whose caller's deadline has
// passed is answered by the failure mode and left out; the message is
// bounded by the latest deadline of the others, so one caller's short
// deadline does not fail another's check (each caller still returns at
// its own). When the router rejects the message as a whole for one check
// (rejectedWhole), each check is sent again alone, so that one caller's
// bad check does not fail the others.
func (s *streamer) send(ws []*waiter) {
	now := time.Now()
	if slices.ContainsFunc(ws, func(w *waiter) bool { return !w.deadline.After(now) }) {
		var live, expired []*waiter
		for _, w := range ws {
			if w.deadline.After(now) {
				live = append(live, w)
			} else {
				expired = append(expired, w)
			}
		}
		ds, err := s.c.outcome(context.Background(), len(expired), nil, status.Error(codes.DeadlineExceeded, "the check's deadline passed before it was sent"))
		deliver(expired, ds, err)
		if ws = live; len(ws) == 0 {
			return
		}
	}
	deadline := ws[0].deadline
	checks := make([]*shardlimitv1.Check, len(ws))
	var tc map[string]string
	for i, w := range ws {
		checks[i] = w.check
		if w.deadline.After(deadline) {
			deadline = w.deadline
		}
		if tc == nil {
			tc = w.trace
		}
	}
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	defer cancel()
	var resp *shardlimitv1.CheckResponse
	var err error
	unary := time.Now().UnixNano() < s.unaryUntil.Load()
	stream := false // the stream itself failed, not one message
	if !unary {
		resp, stream, err = s.roundTrip(ctx, checks, tc)
	}
	// One check alone, over the stream or, against a router older than
	// CheckStream, as a unary Check.
	decide := func(w *waiter) ([]Decision, error) {
		resp, _, err := s.roundTrip(ctx, []*shardlimitv1.Check{w.check}, w.trace)
		return s.c.outcome(context.Background(), 1, resp, err)
	}
	if unary || (stream && status.Code(err) == codes.Unimplemented) {
		// A router older than CheckStream: the batch goes as one unary
		// Check, and so do those of the next minute.
		if !unary {
			s.unaryUntil.Store(time.Now().Add(unaryFor).UnixNano())
		}
		resp, err = s.c.call(ctx, &shardlimitv1.CheckRequest{Checks: checks})
		decide = func(w *waiter) ([]Decision, error) {
			return s.c.decide(context.Background(), ctx, []*shardlimitv1.Check{w.check})
		}
	}
	if len(ws) > 1 && rejectedWhole(status.Code(err)) {
		eachAlone(ws, decide)
		return
	}
	ds, err := s.c.outcome(context.Background(), len(ws), resp, err)
	deliver(ws, ds, err)
}

// roundTrip sends checks in one message and waits for its answer, sending
// it again while retryable allows and the deadline leaves time. stream
// says that err is the stream's (it could not be opened or it ended), not
// the router's answer to the message.
func (s *streamer) roundTrip(ctx context.Context, checks []*shardlimitv1.Check, tc map[string]string) (_ *shardlimitv1.CheckResponse, stream bool, _ error) {
	var err error
	why, lost := "", false
	for attempt := range s.c.opts.MaxAttempts {
		if attempt > 0 {
			d := backoff(s.c.opts.BackoffBase, s.c.opts.BackoffMax, attempt-1, s.c.rand)
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
				break
			}
			if !sleep(ctx, d) {
				break
			}
			s.c.metrics.retry(why)
		}
		var resp *shardlimitv1.CheckStreamResponse
		var sent bool
		resp, sent, err = s.once(ctx, checks, tc)
		if err == nil {
			if resp.Code != 0 {
				return nil, false, status.Error(codes.Code(resp.Code), resp.Message)
			}
			return &shardlimitv1.CheckResponse{Decisions: resp.Decisions}, false, nil
		}
		switch {
		case status.Code(err) != codes.Unavailable:
			return nil, true, err
		case !sent || errors.Is(err, errStreamEnded):
			why = retryNotSent
		case lost:
			return nil, true, err
		default:
			why, lost = retryLost, true
		}
	}
	return nil, true, err
}

// once sends one message on the open stream (opening one if none is) and
// waits for its answer; sent says whether it was written to a stream.
func (s *streamer) once(ctx context.Context, checks []*shardlimitv1.Check, tc map[string]string) (*shardlimitv1.CheckStreamResponse, bool, error) {
	if err := ctx.Err(); err != nil { // nothing sent, nothing counted
		return nil, false, status.FromContextError(err).Err()
	}
	sess, id, err := s.session(ctx)
	if err != nil {
		return nil, false, err
	}
	answer := make(chan *shardlimitv1.CheckStreamResponse, 1)
	if !sess.expect(id, answer) {
		return nil, false, sess.failure()
	}
	defer sess.forget(id)
	// A router that reads nothing holds Send in flow control: the
	// deadline drops the session, which ends the Send.
	answers := sess.answers.Load()
	stop := context.AfterFunc(ctx, func() { s.drop(sess) })
	err = sess.send(&shardlimitv1.CheckStreamRequest{Id: id, Checks: checks, TraceContext: tc})
	stop()
	if err != nil {
		// The stream has ended: receive learns why from Recv.
		return nil, true, sess.failure()
	}
	if s.sentHook != nil {
		s.sentHook(sess)
	}
	// An answer that arrived is used even when the stream ended or the
	// deadline passed just after: taking it for lost would send the
	// message again, and count it twice.
	arrived := func() (*shardlimitv1.CheckStreamResponse, bool) {
		select {
		case resp := <-answer:
			return resp, true
		default:
			return nil, false
		}
	}
	select {
	case resp := <-answer:
		return resp, true, nil
	case <-sess.done:
		if resp, ok := arrived(); ok {
			return resp, true, nil
		}
		return nil, true, sess.failure()
	case <-ctx.Done():
		if resp, ok := arrived(); ok {
			return resp, true, nil
		}
		if s.ctx.Err() != nil {
			return nil, true, ErrClosed
		}
		if sess.answers.Load() == answers {
			// Nothing answered on the stream since this message left:
			// the router is wedged; the next message opens another.
			s.drop(sess)
		}
		return nil, true, status.FromContextError(ctx.Err()).Err()
	}
}

// session returns the open stream, opening one to the router pick chooses
// when none is, and a new message id.
func (s *streamer) session(ctx context.Context) (*session, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, 0, ErrClosed
	}
	s.nextID++
	id := s.nextID
	if s.cur != nil {
		return s.cur, id, nil
	}
	i := s.c.pick(int(s.c.next.Add(1) - 1))
	// The stream lives until Close or until it breaks, not for one check:
	// its context is the streamer's. Opening it waits for no connection
	// that is not ready (gRPC's fail fast), bounded by ctx's deadline too.
	opened := make(chan struct{})
	sctx, cancel := context.WithCancel(s.ctx)
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-opened:
		default:
			cancel()
		}
	})
	stream, err := s.c.stubs[i].CheckStream(sctx)
	close(opened)
	stop()
	if err != nil {
		cancel()
		return nil, 0, err
	}
	sess := &session{stream: stream, cancel: cancel, pending: map[uint64]chan *shardlimitv1.CheckStreamResponse{}, done: make(chan struct{})}
	s.cur = sess
	go s.receive(sess)
	return sess, id, nil
}

// drop forgets sess as the open stream, so the next message opens another.
func (s *streamer) drop(sess *session) {
	s.mu.Lock()
	if s.cur == sess {
		s.cur = nil
	}
	s.mu.Unlock()
	sess.cancel()
}

// receive hands each answer on sess to the message waiting for it, until
// the stream ends; then it fails the messages still waiting.
func (s *streamer) receive(sess *session) {
	for {
		resp, err := sess.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errStreamEnded
			}
			s.drop(sess)
			sess.end(err)
			return
		}
		sess.answer(resp)
	}
}

// session is one CheckStream and the messages waiting on it.
type session struct {
	stream grpc.BidiStreamingClient[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex
	// answers counts the answers received, to tell a router that answers
	// nothing from one that is only slow for one message.
	answers atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan *shardlimitv1.CheckStreamResponse
	err     error         // why the stream ended; set before done closes
	done    chan struct{} // closed when the stream ended
}

func (s *session) send(req *shardlimitv1.CheckStreamRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

// expect registers ch for the answer to id; false when the stream ended.
func (s *session) expect(id uint64, ch chan *shardlimitv1.CheckStreamResponse) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.pending[id] = ch
	return true
}

func (s *session) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

func (s *session) answer(resp *shardlimitv1.CheckStreamResponse) {
	s.answers.Add(1)
	s.mu.Lock()
	ch := s.pending[resp.Id]
	delete(s.pending, resp.Id)
	s.mu.Unlock()
	if ch != nil {
		ch <- resp // buffered 1, and one answer per id
	}
}

func (s *session) end(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
	s.mu.Unlock()
}

// failure is why the stream ended, as the status a unary call would see
// when its connection broke: UNAVAILABLE unless the router sent a status.
func (s *session) failure() error {
	<-s.done
	if _, ok := status.FromError(s.err); ok {
		return s.err
	}
	return status.Error(codes.Unavailable, s.err.Error())
}
