package shardcall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// ErrStalled is the error of a batch whose shard answered nothing on its
// stream for the deadline while the batch waited.
var ErrStalled = errors.New("the shard answered nothing within the deadline")

// grace is how long a batch's waiter stays parked past its deadline before
// it declares the stream stalled: a Go runtime whose processors are all busy
// polls the network only every 10ms (sysmon), so an answer that came in
// time may still be unread when the waiter's timer, which runs first,
// fires. The grace judges the shard, not the router's own backlog.
const grace = 10 * time.Millisecond

// Conn carries batches to one shard. It is safe for concurrent use.
type Conn struct {
	client   shardlimitv1.ShardClient
	life     context.Context // the streams' context: ends them all
	deadline time.Duration
	nextID   atomic.Uint64
	log      *slog.Logger
	opened   int // streams opened; under mu

	mu  sync.Mutex // guards cur; held while a stream opens
	cur *stream
}

// New returns a Conn that calls the shard through client, with streams
// that end when life does, and batches that fail when their shard answers
// nothing for deadline (see Decide). It logs the streams it opens and why
// they end to log, at debug; nil logs nothing.
func New(life context.Context, client shardlimitv1.ShardClient, deadline time.Duration, log *slog.Logger) *Conn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Conn{client: client, life: life, deadline: deadline, log: log}
}

// stream is one DecideStream and the batches in flight on it.
type stream struct {
	c      *Conn
	st     grpc.BidiStreamingClient[shardlimitv1.DecideStreamRequest, shardlimitv1.DecideStreamResponse]
	cancel context.CancelFunc
	sendMu sync.Mutex   // one Send at a time, in the order of fifo
	heard  atomic.Int64 // Unix ns of the last answer (or of the opening)

	mu   sync.Mutex
	fifo []*waiter // sent and unanswered, in the order sent
	err  error     // why the stream ended; nil while it serves
}

// waiter is one batch in flight: its id and, once answered, the answer or
// the error. It gets exactly one answer, on done.
type waiter struct {
	id    uint64
	req   shardlimitv1.DecideStreamRequest
	resp  *shardlimitv1.DecideStreamResponse
	err   error
	done  chan struct{}
	timer *time.Timer
}

var waiters = sync.Pool{New: func() any {
	w := &waiter{done: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	w.timer.Stop()
	return w
}}

// Decide sends req to the shard and returns its answer. It fails with
// ErrStalled when the batch has waited at least the deadline and its
// stream has answered nothing for the deadline (answers to batches sent
// before it show the shard at work, and the batch waits on), after a short
// grace for the router's own scheduling; every batch in flight on the
// stream then fails too, and the stream is dropped. It fails with ctx's
// error when ctx ends, when the stream breaks, or when the shard refuses
// the batch (InvalidArgument).
func (c *Conn) Decide(ctx context.Context, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
	s, err := c.stream(ctx)
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
	if err != nil && err != io.EOF {
		s.fail(err)
	} // io.EOF: the shard ended the stream, and Recv tells why
	s.wait(ctx, w)
	resp, err := w.resp, w.err
	w.resp, w.err = nil, nil
	waiters.Put(w)
	switch {
	case err != nil:
		return nil, err
	case resp.Error != "":
		return nil, status.Error(codes.InvalidArgument, resp.Error)
	case resp.Response == nil:
		return &shardlimitv1.DecideResponse{}, nil
	}
	return resp.Response, nil
}

// wait waits for w's answer, failing the stream when it stalls or ctx
// ends; w has its answer or error when wait returns.
func (s *stream) wait(ctx context.Context, w *waiter) {
	d := s.c.deadline
	w.timer.Reset(d)
	defer w.timer.Stop()
	graced := false
	for {
		select {
		case <-w.done:
			return
		case <-ctx.Done():
			s.failFor(w, ctx.Err())
			return
		case <-w.timer.C:
		}
		if quiet := time.Duration(time.Now().UnixNano() - s.heard.Load()); quiet < d {
			w.timer.Reset(d - quiet) // the shard answers: w waits behind others
			continue
		}
		if !graced {
			graced = true
			w.timer.Reset(grace)
			continue
		}
		s.failFor(w, ErrStalled)
		return
	}
}

// failFor fails the stream with err unless w has been answered already,
// and waits for w's answer or failure.
func (s *stream) failFor(w *waiter, err error) {
	if s.unanswered(w) {
		s.fail(err)
	}
	<-w.done
}

// Alive asks the shard for a decision on no checks, by unary Decide (not
// behind the batches in flight on the stream), and reports nil when it
// answers: the shard is alive and deciding, however late its batches are.
// It fails when the shard cannot be reached (a dead one) or refuses, or
// when ctx ends first (the caller's bound on a shard that answers
// nothing: a stopped process, a cut link).
func (c *Conn) Alive(ctx context.Context) error {
	_, err := c.client.Decide(ctx, &shardlimitv1.DecideRequest{})
	return err
}

// firstOpen bounds the wait for the connection of a Conn's first stream:
// the first dial and TLS handshake to a shard, which a loaded machine may
// take a while over, as a router starts or a shard joins. (A variable for
// tests.)
var firstOpen = 5 * time.Second

// stream returns the open stream, opening one if there is none. Opening
// waits for the connection no longer than ctx, and, once a stream was
// open, than the deadline and its grace: a connection being dialed again
// (a shard the network cut off, whose connection closed) holds a new
// stream until it is ready, and a batch must not wait for that longer
// than for an answer. The first stream waits up to firstOpen.
func (c *Conn) stream(ctx context.Context) (*stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return c.cur, nil
	}
	wait := c.deadline + grace
	if c.opened == 0 {
		wait = firstOpen
	}
	ctx, done := context.WithTimeout(ctx, wait)
	defer done()
	sctx, cancel := context.WithCancel(c.life)
	stop := context.AfterFunc(ctx, cancel)
	st, err := c.client.DecideStream(sctx)
	if !stop() || err != nil {
		cancel()
		err = errors.Join(err, ctx.Err())
		c.log.Debug("cannot open a DecideStream to the shard", "err", err)
		return nil, err
	}
	s := &stream{c: c, st: st, cancel: cancel}
	s.heard.Store(time.Now().UnixNano())
	c.cur = s
	if c.opened++; c.opened > 1 {
		c.log.Debug("DecideStream to the shard reopened", "streams_opened", c.opened)
	} else {
		c.log.Debug("DecideStream to the shard opened")
	}
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
		s.heard.Store(time.Now().UnixNano())
		w.resp = resp
		w.done <- struct{}{}
	}
}

// fail ends the stream with err: every batch in flight fails with it, and
// the Conn opens a new stream for the next batch.
func (s *stream) fail(err error) {
	s.mu.Lock()
	first := s.err == nil
	if first {
		s.err = err
	}
	err = s.err
	pending := s.fifo
	s.fifo = nil
	s.mu.Unlock()
	if first && s.c.life.Err() == nil {
		s.c.log.Debug("DecideStream to the shard ended; the next batch opens a new one", "err", err, "batches_failed", len(pending))
	}
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
