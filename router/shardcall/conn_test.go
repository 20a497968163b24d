package shardcall

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// fakeShard answers each batch with one decision per check whose
// remaining is the check's hits, so a caller can tell its answer; a check
// with user "stall" holds its batch (and the stream) until released, and
// one with user "bad" gets the batch refused.
type fakeShard struct {
	shardlimitv1.UnimplementedShardServer
	streams atomic.Int64 // DecideStreams opened
	release chan struct{}
}

func answer(req *shardlimitv1.DecideRequest) *shardlimitv1.DecideResponse {
	resp := &shardlimitv1.DecideResponse{}
	for _, c := range req.Checks {
		resp.Decisions = append(resp.Decisions, &shardlimitv1.ShardDecision{Allowed: true, Remaining: c.Hits})
	}
	return resp
}

func (f *fakeShard) DecideStream(st grpc.BidiStreamingServer[shardlimitv1.DecideStreamRequest, shardlimitv1.DecideStreamResponse]) error {
	f.streams.Add(1)
	for {
		req, err := st.Recv()
		if err != nil {
			return nil
		}
		out := &shardlimitv1.DecideStreamResponse{Batch: req.Batch, Response: answer(req.Request)}
		switch req.Request.Checks[0].User {
		case "slow":
			time.Sleep(50 * time.Millisecond) // a shard at work on a long batch
		case "stall":
			select {
			case <-f.release:
			case <-st.Context().Done():
				return nil
			}
		case "bad":
			out.Response, out.Error = nil, "checks[0].rule: index 3 out of range 0..0"
		}
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

func serve(t *testing.T, srv shardlimitv1.ShardServer) shardlimitv1.ShardClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	shardlimitv1.RegisterShardServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return shardlimitv1.NewShardClient(conn)
}

func batch(user string, hits int64) *shardlimitv1.DecideRequest {
	return &shardlimitv1.DecideRequest{Checks: []*shardlimitv1.ShardCheck{{Service: "s", User: user, Hits: hits}}}
}

func decide(t *testing.T, c *Conn, timeout time.Duration, req *shardlimitv1.DecideRequest) (*shardlimitv1.DecideResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Decide(ctx, req)
}

// Concurrent batches share one stream, and each caller gets its own answer.
func TestBatchesShareOneStreamAndGetTheirOwnAnswers(t *testing.T) {
	f := &fakeShard{}
	c := New(t.Context(), serve(t, f), time.Minute, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				hits := int64(g*1000 + i)
				resp, err := decide(t, c, 10*time.Second, batch("u", hits))
				if err != nil || len(resp.Decisions) != 1 || resp.Decisions[0].Remaining != hits {
					t.Errorf("batch %d: %v, %v", hits, resp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := f.streams.Load(); n != 1 {
		t.Fatalf("%d streams opened, want 1", n)
	}
}

// A batch the shard refuses fails alone, as unary Decide would fail it;
// the stream goes on.
func TestRefusedBatchFailsAloneAsInvalidArgument(t *testing.T) {
	f := &fakeShard{}
	c := New(t.Context(), serve(t, f), time.Minute, nil)
	_, err := decide(t, c, 10*time.Second, batch("bad", 1))
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != "checks[0].rule: index 3 out of range 0..0" {
		t.Fatalf("refused batch: %v", err)
	}
	if resp, err := decide(t, c, 10*time.Second, batch("u", 7)); err != nil || resp.Decisions[0].Remaining != 7 {
		t.Fatalf("next batch: %v, %v", resp, err)
	}
	if n := f.streams.Load(); n != 1 {
		t.Fatalf("%d streams opened, want 1", n)
	}
}

// When a batch's context ends (its deadline passes), every batch in flight
// on its stream fails, and the next batch goes out on a new stream.
func TestDeadlineDropsTheStalledStream(t *testing.T) {
	f := &fakeShard{release: make(chan struct{})}
	defer close(f.release)
	c := New(t.Context(), serve(t, f), time.Minute, nil)
	if _, err := decide(t, c, 10*time.Second, batch("warm", 1)); err != nil {
		t.Fatal(err)
	}
	inFlight := func(n int) func() error {
		return func() error {
			if got := c.inFlight(); got != n {
				return fmt.Errorf("%d batches in flight, want %d", got, n)
			}
			return nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stalled, behind := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := c.Decide(ctx, batch("stall", 1))
		stalled <- err
	}()
	poll.Until(t, 10*time.Second, inFlight(1))
	go func() {
		_, err := decide(t, c, time.Minute, batch("behind", 1))
		behind <- err
	}()
	poll.Until(t, 10*time.Second, inFlight(2))
	cancel() // as its deadline would
	if err := <-stalled; err != context.Canceled {
		t.Fatalf("stalled batch: %v, want its context's end", err)
	}
	if err := <-behind; err != context.Canceled {
		t.Fatalf("the batch behind the stalled one: %v, want the stream's failure", err)
	}
	if resp, err := decide(t, c, 10*time.Second, batch("after", 3)); err != nil || resp.Decisions[0].Remaining != 3 {
		t.Fatalf("after the stall: %v, %v", resp, err)
	}
	if n := f.streams.Load(); n != 2 {
		t.Fatalf("%d streams opened, want 2: a stalled stream is never reused", n)
	}
}

// A stream that answers nothing for the deadline while a batch waits is
// stalled: the batch fails with ErrStalled, and the next goes out on a new
// stream.
func TestSilentStreamStalls(t *testing.T) {
	f := &fakeShard{release: make(chan struct{})}
	defer close(f.release)
	// A second of silence: the new stream's answer to the next batch comes
	// well within it on a loaded machine.
	c := New(t.Context(), serve(t, f), time.Second, nil)
	if _, err := c.Decide(context.Background(), batch("stall", 1)); !errors.Is(err, ErrStalled) {
		t.Fatalf("batch to a silent shard: %v, want ErrStalled", err)
	}
	if resp, err := c.Decide(context.Background(), batch("after", 2)); err != nil || resp.Decisions[0].Remaining != 2 {
		t.Fatalf("after the stall: %v, %v", resp, err)
	}
	if n := f.streams.Load(); n != 2 {
		t.Fatalf("%d streams opened, want 2", n)
	}
}

// A batch that waits longer than the deadline behind others is not failed
// while the shard keeps answering them: the deadline judges the shard's
// silence, not the batch's wait. (Each batch takes 50ms; the last of 60
// waits 3s, over the deadline of 2s, which is far above any gap between
// two answers on a loaded machine.)
func TestBatchWaitingBehindAnsweringShardDoesNotStall(t *testing.T) {
	const batches = 60
	f := &fakeShard{}
	c := New(t.Context(), serve(t, f), 2*time.Second, nil)
	errs := make(chan error, batches)
	for i := range batches {
		go func() {
			_, err := c.Decide(context.Background(), batch("slow", int64(i)))
			errs <- err
		}()
	}
	for range batches {
		if err := <-errs; err != nil {
			t.Fatalf("a batch behind others failed while the shard answered: %v", err)
		}
	}
}

// inFlight returns the batches in flight on the open stream.
func (c *Conn) inFlight() int {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fifo)
}

// decideWithin runs Decide with no deadline of its own, failing the test if
// it holds the batch for a minute.
func decideWithin(t *testing.T, c *Conn, req *shardlimitv1.DecideRequest) error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		_, err := c.Decide(context.Background(), req)
		got <- err
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Decide held a batch for a minute while its connection was being dialed")
		return nil
	}
}

// A connection being dialed (a shard the network cut off: its connection
// closed, and each dial answers nothing) holds a new stream until it is
// ready: once a stream was open, Decide gives up after the deadline and
// its grace instead, as for a shard that answers nothing, and the caller's
// breaker judges it; the first stream waits up to firstOpen (a cold dial
// on a loaded machine), and no longer.
func TestStreamToAConnectionBeingDialedFailsAtTheDeadline(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	shardlimitv1.RegisterShardServer(srv, &fakeShard{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	var silent atomic.Bool
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if silent.Load() {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A first open that waited the deadline would take a minute and fail:
	// the reopen below must not.
	saved := firstOpen
	t.Cleanup(func() { firstOpen = saved })
	firstOpen = 10 * time.Minute
	c := New(t.Context(), shardlimitv1.NewShardClient(conn), 100*time.Millisecond, nil)
	if err := decideWithin(t, c, batch("u", 1)); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	silent.Store(true)
	srv.Stop() // the connection closes; every dial from now on is silent
	for i := 0; ; i++ {
		err := decideWithin(t, c, batch("u", 1))
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if i == 10 {
			t.Fatalf("batches after the connection closed: %v, want DeadlineExceeded once the broken stream is dropped", err)
		}
	}

	firstOpen = 200 * time.Millisecond
	cold, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	if err := decideWithin(t, New(t.Context(), shardlimitv1.NewShardClient(cold), 100*time.Millisecond, nil), batch("u", 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first batch to a connection that is never ready: %v, want DeadlineExceeded after firstOpen", err)
	}
}
