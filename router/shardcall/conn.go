package shardcall

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// Conn carries batches to one shard. It is safe for concurrent use.
type Conn struct {
	client shardlimitv1.ShardClient
	life   context.Context // the streams' context: ends them all
	unary  atomic.Bool     // the shard has no DecideStream
	nextID atomic.Uint64

	mu  sync.Mutex // guards cur; held while a stream opens
	cur *stream
}

// New returns a Conn that calls the shard through client, with streams
// that end when life does.
func New(life context.Context, client shardlimitv1.ShardClient) *Conn {
	return &Conn{client: client, life: life}
}

// stream is one DecideStream and the batches in flight on it.
type stream struct {
	c      *Conn
	st     grpc.BidiStreamingClient[shardlimitv1.DecideStreamRequest, shardlimitv1.DecideStreamResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex // one Send at a time, in the order of fifo

	mu   sync.Mutex
	fifo []*waiter // sent and unanswered, in the order sent
	err  error     // why the stream ended; nil while it serves
}

// waiter is one batch in flight: its id and, once answered, the answer or
// the error. It gets exactly one answer, on done.
type waiter struct {
	id   uint64
	req  shardlimitv1.DecideStreamRequest
	resp *shardlimitv1.DecideStreamResponse
	err  error
	done chan struct{}
}

var waiters = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// Decide sends req to the shard and returns its answer, or an error when
// ctx ends first (and then every other batch in flight on the stream fails
// too, and the stream is dropped), when the stream breaks, or when the
// shard refuses the batch (InvalidArgument, as unary Decide would).
func (c *Conn) Decide(ctx context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
	if c.unary.Load() {
		return c.client.Decide(ctx, req)
	}
	s, err := c.stream(ctx)
	if status.Code(err) == codes.Unimplemented {
		return c.unaryFromNowOn(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	w := waiters.Get().(*waiter)
	w.req.Request = req
	queued, err := s.send(w)
	w.req.Request = nil
	if !queued {
		waiters.Put(w)
		return nil, err
	}
	if err != nil {
		s.fail(err)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		// An answer that came in time wins over a deadline noticed late
		// (the router itself was slow to run); else the stream is stalled.
		if s.unanswered(w) {
			s.fail(ctx.Err())
		}
		<-w.done
	}
	resp, err := w.resp, w.err
	w.resp, w.err = nil, nil
	waiters.Put(w)
	switch {
	case status.Code(err) == codes.Unimplemented:
		return c.unaryFromNowOn(ctx, req)
	case err != nil:
		return nil, err
	case resp.Error != "":
		return nil, status.Error(codes.InvalidArgument, resp.Error)
	case resp.Response == nil:
		return &shardlimitv1.DecideResponse{}, nil
	}
	return resp.Response, nil
}

// unaryFromNowOn calls a shard that has no DecideStream with unary Decide,
// req first: a shard that did not know the method decided nothing of it.
func (c *Conn) unaryFromNowOn(ctx context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
	c.unary.Store(true)
	return c.client.Decide(ctx, req)
}

// stream returns the open stream, opening one if there is none. Opening
// waits for the connection no longer than ctx.
func (c *Conn) stream(ctx context.Context) (*stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return c.cur, nil
	}
	sctx, cancel := context.WithCancel(c.life)
	stop := context.AfterFunc(ctx, cancel)
	st, err := c.client.DecideStream(sctx)
	if !stop() || err != nil {
		cancel()
		return nil, errors.Join(err, ctx.Err())
	}
	s := &stream{c: c, st: st, cancel: cancel}
	c.cur = s
	go s.receive()
	return s, nil
}

// send puts w in flight: in the fifo, then on the wire, in one order. It
// reports whether w was queued (and will get an answer on done), and the
// error of the Send.
func (s *stream) send(w *waiter) (queued bool, err error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return false, err
	}
	w.id = s.c.nextID.Add(1)
	w.req.Batch = w.id
	s.fifo = append(s.fifo, w)
	s.mu.Unlock()
	return true, s.st.Send(&w.req)
}

// unanswered reports whether w is still waiting for its answer.
func (s *stream) unanswered(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.fifo, w)
}

// receive hands each answer to its batch, until the stream ends.
func (s *stream) receive() {
	for {
		resp, err := s.st.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		if len(s.fifo) == 0 || s.fifo[0].id != resp.Batch {
			s.mu.Unlock()
			s.fail(fmt.Errorf("shard answered batch %d out of order", resp.Batch))
			return
		}
		w := s.fifo[0]
		s.fifo[0] = nil
		s.fifo = s.fifo[1:]
		s.mu.Unlock()
		w.resp = resp
		w.done <- struct{}{}
	}
}

// fail ends the stream with err: every batch in flight fails with it, and
// the Conn opens a new stream for the next batch.
func (s *stream) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	err = s.err
	pending := s.fifo
	s.fifo = nil
	s.mu.Unlock()
	s.cancel()
	s.c.mu.Lock()
	if s.c.cur == s {
		s.c.cur = nil
	}
	s.c.mu.Unlock()
	for _, w := range pending {
		w.err = err
		w.done <- struct{}{}
	}
}
