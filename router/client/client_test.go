package client

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

// Cluster tests check decisions, not latency: a generous timeout keeps a
// loaded machine from answering by failure mode. It is above the test
// routers' 5 s deadline for a shard (clustertest), so that a slow shard is
// answered for by the router, never by the client. At load 36 a 2 s
// timeout passed.
const clusterTimeout = 30 * time.Second

// hangGuard bounds how long a call that should be answered at its timeout
// may take on a loaded machine (load 20-40 on 2 cores stalls a process for
// seconds): it catches a call that hangs or retries on, not a late timer.
// Exactness is held by what the call did (its attempts), not by the clock.
const hangGuard = 10 * time.Second

// 30 checks of one user under 10 per minute: exactly the first 10 are
// allowed, each decision as the router gives it.
func TestDecisionsMatchTheServer(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: testRules(t)})
	cl := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: clusterTimeout})
	ctx := context.Background()
	allowed := 0
	for i := range 30 {
		d, err := cl.Check(ctx, "shop", "/checkout", "alice", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.FromFailureMode || d.FailurePolicy || d.Rule != "checkout" || d.Limit != 10 {
			t.Fatalf("check %d: %+v", i, d)
		}
		if d.Allowed != (i < 10) {
			t.Fatalf("check %d: allowed %v", i, d.Allowed)
		}
		if d.Allowed {
			allowed++
			if d.Remaining != int64(9-i) || d.RetryAfter != 0 || d.ResetAfter <= 0 {
				t.Fatalf("check %d: %+v, want remaining %d", i, d, 9-i)
			}
		} else if d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > 6*time.Second {
			t.Fatalf("check %d: %+v, want denied with retry after in (0, 6s]", i, d)
		}
	}
	if allowed != 10 {
		t.Fatalf("allowed %d of 30, want 10", allowed)
	}

	// A read (hits 0) through the client equals one through a raw stub.
	got, err := cl.Check(ctx, "shop", "/checkout", "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	resp, err := c.Client(0).Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "alice", Hits: &zero}}})
	if err != nil {
		t.Fatal(err)
	}
	want := fromProto(resp.Decisions[0])
	if got.Allowed != want.Allowed || got.Limit != want.Limit || got.Remaining != want.Remaining || got.Rule != want.Rule ||
		(got.RetryAfter-want.RetryAfter).Abs() > time.Second || (got.ResetAfter-want.ResetAfter).Abs() > time.Second {
		t.Fatalf("client read %+v, raw read %+v", got, want)
	}

	// CheckBatch answers in order, in one RPC.
	ds, err := cl.CheckBatch(ctx, []Check{
		{Service: "shop", Endpoint: "/checkout", User: "alice", Hits: 1},
		{Service: "shop", Endpoint: "/checkout", User: "bob", Hits: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Allowed || !ds[1].Allowed || ds[1].Remaining != 6 {
		t.Fatalf("batch: %+v", ds)
	}
}

// Concurrent Checks with a batch window share RPCs, and every user still
// gets exactly 10.
func TestBatchingCoalescesAndStaysExact(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: testRules(t)})
	var rc rpcCounter
	cl := newClient(t, Options{
		TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: clusterTimeout,
		// A window long enough that the 300 checks, started together,
		// reach the batcher within a few windows on a loaded machine too.
		BatchWindow: 200 * time.Millisecond, MaxBatch: 1000,
		DialOptions: withOpts(rc.option()),
	})
	const users, per = 10, 30
	var allowed [users]atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for u := range users {
		for range per {
			wg.Go(func() {
				<-start
				d, err := cl.Check(context.Background(), "shop", "/checkout", fmt.Sprintf("user-%d", u), 1)
				if err != nil || d.FromFailureMode || d.FailurePolicy {
					t.Errorf("user-%d: %+v %v", u, d, err)
				}
				if d.Allowed {
					allowed[u].Add(1)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for u := range users {
		if n := allowed[u].Load(); n != 10 {
			t.Errorf("user-%d: %d allowed, want 10", u, n)
		}
	}
	t.Logf("%d checks in %d RPCs", rc.checks.Load(), rc.rpcs.Load())
	if rc.checks.Load() != users*per || rc.rpcs.Load() > users*per/10 {
		t.Fatalf("%d checks in %d RPCs; want %d checks in at most %d RPCs", rc.checks.Load(), rc.rpcs.Load(), users*per, users*per/10)
	}
}

// A batch is sent as soon as it holds MaxBatch checks, long before its
// window ends; a lone check is sent when the window ends.
func TestBatchFlushesAtMaxBatchAndAtWindow(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	var rc rpcCounter
	cl := newClient(t, Options{
		TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: time.Minute,
		BatchWindow: 30 * time.Second, MaxBatch: 5,
		DialOptions: withOpts(rc.option()),
	})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if d, err := cl.Check(context.Background(), "shop", "/checkout", fmt.Sprintf("m%d", i), 1); err != nil || !d.Allowed || d.Remaining != 9 {
				t.Errorf("m%d: %+v %v", i, d, err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took > 10*time.Second || rc.rpcs.Load() != 1 {
		t.Fatalf("5 checks took %v in %d RPCs; want 1 RPC sent when full", took, rc.rpcs.Load())
	}

	short := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: clusterTimeout, BatchWindow: time.Millisecond})
	if d, err := short.Check(context.Background(), "shop", "/checkout", "lone", 1); err != nil || !d.Allowed || d.Remaining != 9 {
		t.Fatalf("lone check: %+v %v", d, err)
	}
}

// One check that the router rejects does not fail the others coalesced with
// it: the batch is rejected whole (nothing counted) and each check is sent
// again alone.
func TestBatchIsolatesABadCheck(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	var rc rpcCounter
	cl := newClient(t, Options{
		TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: time.Minute,
		BatchWindow: 30 * time.Second, MaxBatch: 3,
		DialOptions: withOpts(rc.option()),
	})
	users := []string{"carol", strings.Repeat("x", 300), "dave"} // the router's max user length is 256
	errs := make([]error, 3)
	ds := make([]Decision, 3)
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() { ds[i], errs[i] = cl.Check(context.Background(), "shop", "/checkout", u, 1) })
	}
	wg.Wait()
	if !errors.Is(errs[1], ErrInvalidCheck) || status.Code(errs[1]) != codes.InvalidArgument || !strings.Contains(errs[1].Error(), "user") {
		t.Fatalf("long user: %v, want ErrInvalidCheck with INVALID_ARGUMENT naming user", errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil || !ds[i].Allowed || ds[i].Remaining != 9 {
			t.Fatalf("%s: %+v %v, want allowed with remaining 9 (counted once)", users[i], ds[i], errs[i])
		}
	}
	if rc.rpcs.Load() != 4 {
		t.Fatalf("%d RPCs, want 4: the batch, then each check alone", rc.rpcs.Load())
	}
}

// With nothing listening at the router address, the client answers by its
// failure mode within the timeout, with or without batching.
func TestFailureModeWhenNothingListens(t *testing.T) {
	const timeout = 100 * time.Millisecond
	addr := rpctest.DeadAddr(t)
	for _, mode := range []FailureMode{FailOpen, FailClosed} {
		for _, window := range []time.Duration{0, time.Millisecond} {
			t.Run(fmt.Sprintf("%v/window=%v", mode, window), func(t *testing.T) {
				cl := newClient(t, Options{Routers: []string{addr}, Timeout: timeout, FailureMode: mode, BatchWindow: window})
				for i := range 3 {
					start := time.Now()
					d, err := cl.Check(context.Background(), "shop", "/checkout", "alice", 1)
					took := time.Since(start)
					if err != nil {
						t.Fatal(err)
					}
					if !d.FromFailureMode || d.Allowed != (mode == FailOpen) || d.Rule != "" {
						t.Fatalf("check %d: %+v", i, d)
					}
					if mode == FailClosed && d.RetryAfter != FailClosedRetryAfter {
						t.Fatalf("check %d: retry after %v, want %v", i, d.RetryAfter, FailClosedRetryAfter)
					}
					if took > timeout+hangGuard {
						t.Fatalf("check %d answered after %v, timeout %v", i, took, timeout)
					}
				}
			})
		}
	}
}

// A router that accepts the request and never answers gets exactly one
// attempt: DEADLINE_EXCEEDED is never retried, as the check may have been
// counted. The answer is the failure mode's, at the timeout.
func TestNoRetryOnDeadlineExceeded(t *testing.T) {
	// Long enough for the request to reach the router on a loaded machine
	// (the router must see exactly one call).
	const timeout = time.Second
	h := startHangingRouter(t)
	var rc rpcCounter
	cl := newClient(t, Options{
		TLS: h.tls, Routers: []string{h.addr}, Timeout: timeout, MaxAttempts: 5, FailureMode: FailClosed,
		DialOptions: withOpts(rc.option()),
	})
	waitReady(t, cl) // the TLS handshake is not the call's to wait for
	start := time.Now()
	d, err := cl.Check(context.Background(), "shop", "/checkout", "alice", 1)
	took := time.Since(start)
	if err != nil || !d.FromFailureMode || d.Allowed {
		t.Fatalf("%+v %v, want denied by failure mode", d, err)
	}
	if took < timeout || took > timeout+hangGuard {
		t.Fatalf("answered after %v, want the timeout %v", took, timeout)
	}
	if n := rc.rpcs.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	poll.Until(t, 30*time.Second, func() error {
		if n := h.calls.Load(); n != 1 {
			return fmt.Errorf("router handled %d calls, want 1", n)
		}
		return nil
	})
}

// A connection failure (nothing listening: the request was never sent) is
// retried on the next router, which answers; every check is counted once.
func TestRetryOnConnectionFailureGoesToTheNextRouter(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	dead, live := rpctest.DeadAddr(t), c.Routers[0].Addr()
	var rc rpcCounter
	cl := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{dead, live}, Timeout: clusterTimeout, DialOptions: withOpts(rc.option())})
	cl.skipFailing = false // plain round robin: calls 0 and 2 try the dead router first
	for i := range 4 {
		d, err := cl.Check(context.Background(), "shop", "/checkout", "erin", 1)
		if err != nil || d.FromFailureMode || !d.Allowed || d.Remaining != int64(9-i) {
			t.Fatalf("check %d: %+v %v, want remaining %d from the live router", i, d, err, 9-i)
		}
	}
	if rc.to(dead) != 2 || rc.to(live) != 4 {
		t.Fatalf("attempts: dead %d, live %d; want 2 and 4", rc.to(dead), rc.to(live))
	}

	// By default a router whose connection is failing is skipped.
	cl.skipFailing = true
	poll.Until(t, 30*time.Second, func() error {
		if s := cl.conns[0].GetState(); s != connectivity.TransientFailure {
			return fmt.Errorf("dead router's connection is %v", s)
		}
		return nil
	})
	for i := range 4 {
		if d, err := cl.Check(context.Background(), "shop", "/checkout", "frank", 1); err != nil || d.FromFailureMode || d.Remaining != int64(9-i) {
			t.Fatalf("check %d: %+v %v", i, d, err)
		}
	}
	if rc.to(dead) != 2 {
		t.Fatalf("attempts to the dead router grew to %d while it was failing", rc.to(dead))
	}
}

// Retries stop when the next backoff would pass the deadline: the answer
// comes before the timeout, not after.
func TestRetriesStayWithinTheDeadline(t *testing.T) {
	const timeout = 250 * time.Millisecond
	var rc rpcCounter
	cl := newClient(t, Options{
		Routers: []string{rpctest.DeadAddr(t)}, Timeout: timeout, MaxAttempts: 10,
		BackoffBase: 100 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		DialOptions: withOpts(rc.option()),
	})
	cl.rand = func(n int64) int64 { return n - 1 } // always the longest backoff
	start := time.Now()
	d, err := cl.Check(context.Background(), "shop", "/checkout", "alice", 1)
	took := time.Since(start)
	if err != nil || !d.FromFailureMode {
		t.Fatalf("%+v %v", d, err)
	}
	// 100ms apart within 250ms: at most 3 (a 4th would start past the
	// deadline); fewer when a loaded machine slows the attempts.
	if n := rc.rpcs.Load(); n < 1 || n > 3 {
		t.Fatalf("%d attempts, want 1 to 3 (100ms apart within 250ms)", n)
	}
	t.Logf("%d attempts, answered after %v", rc.rpcs.Load(), took)
	if took >= timeout+hangGuard {
		t.Fatalf("answered after %v; retries must stop before the %v deadline", took, timeout)
	}
}

// Bad input is an error, never a failure-mode answer; what the client can
// see costs no RPC.
func TestBadInputIsAnError(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	var rc rpcCounter
	cl := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: clusterTimeout, DialOptions: withOpts(rc.option())})
	ctx := context.Background()
	for _, chk := range []Check{
		{Endpoint: "/checkout", User: "u", Hits: 1},
		{Service: "shop", User: "u", Hits: 1},
		{Service: "shop", Endpoint: "/checkout", User: "u", Hits: -1},
		{Service: "shop", Endpoint: "/checkout", User: "u", IP: "not-an-ip", Hits: 1},
	} {
		if _, err := cl.CheckOne(ctx, chk); !errors.Is(err, ErrInvalidCheck) {
			t.Errorf("%+v: %v, want ErrInvalidCheck", chk, err)
		}
	}
	if _, err := cl.CheckBatch(ctx, nil); !errors.Is(err, ErrInvalidCheck) {
		t.Errorf("empty batch: %v", err)
	}
	if n := rc.rpcs.Load(); n != 0 {
		t.Fatalf("%d RPCs for checks the client can reject itself", n)
	}

	_, err := cl.Check(ctx, "nosuch", "/x", "u", 1)
	if !errors.Is(err, ErrUnknownService) || status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v, want ErrUnknownService with NOT_FOUND", err)
	}
	for name, user := range map[string]string{"missing user": "", "long user": strings.Repeat("u", 300)} {
		_, err := cl.Check(ctx, "shop", "/checkout", user, 1)
		if !errors.Is(err, ErrInvalidCheck) || status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "user") {
			t.Errorf("%s: %v, want ErrInvalidCheck with INVALID_ARGUMENT naming user", name, err)
		}
	}
	// A batch with one bad check is rejected whole: nothing is counted.
	_, err = cl.CheckBatch(ctx, []Check{
		{Service: "shop", Endpoint: "/checkout", User: "gina", Hits: 1},
		{Service: "shop", Endpoint: "/checkout", User: strings.Repeat("u", 300), Hits: 1},
	})
	if !errors.Is(err, ErrInvalidCheck) {
		t.Fatalf("batch with a bad check: %v", err)
	}
	if d, err := cl.Check(ctx, "shop", "/checkout", "gina", 1); err != nil || d.Remaining != 9 {
		t.Fatalf("gina after the rejected batch: %+v %v, want remaining 9", d, err)
	}
}

// A canceled context is the caller's error, not a failure-mode answer; a
// closed client says so, also to calls waiting in a batch.
func TestCanceledAndClosed(t *testing.T) {
	h := startHangingRouter(t)
	for _, window := range []time.Duration{0, time.Millisecond} {
		cl := newClient(t, Options{TLS: h.tls, Routers: []string{h.addr}, Timeout: time.Minute, BatchWindow: window})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := cl.Check(ctx, "shop", "/checkout", "alice", 1)
			done <- err
		}()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("window %v: canceled check: %v, want context.Canceled", window, err)
		}
	}

	cl := newClient(t, Options{TLS: h.tls, Routers: []string{h.addr}, Timeout: time.Minute, BatchWindow: 30 * time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := cl.Check(context.Background(), "shop", "/checkout", "alice", 1)
		done <- err
	}()
	poll.Until(t, 30*time.Second, func() error {
		cl.batch.mu.Lock()
		defer cl.batch.mu.Unlock()
		if len(cl.batch.pending) != 1 {
			return fmt.Errorf("%d checks waiting in the batch", len(cl.batch.pending))
		}
		return nil
	})
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiting check: %v, want ErrClosed", err)
	}
	if _, err := cl.Check(context.Background(), "shop", "/checkout", "alice", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("check after close: %v", err)
	}
	if _, err := cl.CheckBatch(context.Background(), []Check{{Service: "s", Endpoint: "e", User: "u", Hits: 1}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("batch after close: %v", err)
	}
}

// waitReady waits until every connection of cl is ready.
func waitReady(t *testing.T, cl *Client) {
	t.Helper()
	poll.Until(t, 10*time.Second, func() error {
		for i, conn := range cl.conns {
			if st := conn.GetState(); st != connectivity.Ready {
				conn.Connect()
				return fmt.Errorf("connection %d is %v", i, st)
			}
		}
		return nil
	})
}

// Importing the client (and the router packages its tests import) leaves
// gRPC's registered proto codec as gRPC made it: the client's connections
// use vtprotobuf's code on their own (vtcodec.CallerDialOption), not every
// connection of the program that imports it.
func TestImportKeepsGRPCCodec(t *testing.T) {
	c := encoding.GetCodecV2(protocodec.Name)
	typ := reflect.TypeOf(c)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if p := typ.PkgPath(); p != "google.golang.org/grpc/encoding/proto" {
		t.Fatalf("gRPC's proto codec is %T (from %s), want gRPC's own", c, p)
	}
}
