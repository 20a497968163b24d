package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

// streamCounter counts the client's CheckStream streams and messages.
type streamCounter struct{ streams, messages atomic.Int64 }

func (c *streamCounter) option() grpc.DialOption {
	return grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		c.streams.Add(1)
		s, err := streamer(ctx, desc, cc, method, opts...)
		return countedStream{s, c}, err
	})
}

type countedStream struct {
	grpc.ClientStream
	c *streamCounter
}

func (s countedStream) SendMsg(m any) error {
	s.c.messages.Add(1)
	return s.ClientStream.SendMsg(m)
}

// comparable is what a decision says that does not depend on when it was
// made.
func comparable(d Decision) string {
	return fmt.Sprintf("allowed=%v limit=%d remaining=%d rule=%s window=%v never=%v policy=%v overload=%v quotas=%d",
		d.Allowed, d.Limit, d.Remaining, d.Rule, d.Window, d.NeverAllowed, d.FailurePolicy, d.Overload, len(d.Quotas))
}

// Over CheckStream, concurrent callers get the decisions unary calls give
// for the same sequence of checks, with the same metrics, under a
// service's token; a caller's bad check (a service its grant does not
// hold, a user over the router's bound) gets its error
// without failing the checks it shared a message with.
func TestStreamDecidesAsUnary(t *testing.T) {
	rs := parseRules(t, `
rules:
  - {service: shop, endpoint: /checkout, name: checkout, limit: 10, period: 1h}
  - {service: shop, endpoint: /checkout, name: checkout-ip, key: [ip], limit: 1000, period: 1h}
  - {service: other, endpoint: /e, limit: 10, period: 1h}
`)
	c, caOnly, token := shopCluster(t, 2, rs)
	var unaryRPCs rpcCounter
	var streamed streamCounter
	reg := prometheus.NewRegistry()
	stream := newClient(t, Options{Routers: []string{c.Routers[0].Addr()}, TLS: caOnly, Token: token, Timeout: clusterTimeout,
		Stream: true, Registerer: reg, DialOptions: withOpts(unaryRPCs.option(), streamed.option())})
	unary := newClient(t, Options{Routers: []string{c.Routers[0].Addr()}, TLS: caOnly, Token: token, Timeout: clusterTimeout})

	const users, checks = 24, 13
	run := func(cl *Client, prefix string) [][]string {
		got := make([][]string, users)
		var wg sync.WaitGroup
		for u := range users {
			wg.Go(func() {
				for i := range checks {
					d, err := cl.CheckOne(context.Background(), Check{Service: "shop", Endpoint: "/checkout",
						User: fmt.Sprintf("%s-%d", prefix, u), IP: fmt.Sprintf("10.0.%d.%d", len(prefix), u), Hits: int64(1 + i%2)})
					if err != nil {
						t.Errorf("%s user %d check %d: %v", prefix, u, i, err)
						return
					}
					got[u] = append(got[u], comparable(d))
				}
			})
		}
		// Bad checks beside them, over the same client.
		wg.Go(func() {
			if _, err := cl.Check(context.Background(), "other", "/e", "x", 1); err == nil || !strings.Contains(err.Error(), "PermissionDenied") {
				t.Errorf("%s: a service outside the grant: %v, want PermissionDenied", prefix, err)
			}
		})
		wg.Go(func() {
			if _, err := cl.Check(context.Background(), "shop", "/checkout", strings.Repeat("u", 100_000), 1); !errors.Is(err, ErrInvalidCheck) {
				t.Errorf("%s: a user over the bound: %v, want ErrInvalidCheck", prefix, err)
			}
		})
		wg.Wait()
		return got
	}
	want, got := run(unary, "same"), [][]string(nil)
	// The unary run counted for users same-*: the stream's run checks
	// other users with the same sequence, from zero.
	got = run(stream, "sam2")
	for u := range users {
		if strings.Join(got[u], "\n") != strings.Join(want[u], "\n") {
			t.Errorf("user %d over the stream:\n%s\nunary:\n%s", u, strings.Join(got[u], "\n"), strings.Join(want[u], "\n"))
		}
	}
	if n := unaryRPCs.rpcs.Load(); n != 0 {
		t.Errorf("the stream client made %d unary calls, want 0", n)
	}
	if streamed.streams.Load() == 0 || streamed.messages.Load() == 0 {
		t.Errorf("%d streams, %d messages: the checks did not go over CheckStream", streamed.streams.Load(), streamed.messages.Load())
	}
	t.Logf("%d checks in %d messages on %d streams", users*checks+3, streamed.messages.Load(), streamed.streams.Load())
	allowed := clustertest.Metric(t, reg, "shardlimit_client_decisions_total", map[string]string{"result": "allowed"})
	denied := clustertest.Metric(t, reg, "shardlimit_client_decisions_total", map[string]string{"result": "denied"})
	if allowed+denied != users*checks {
		t.Errorf("decisions metric: %v allowed + %v denied, want %d", allowed, denied, users*checks)
	}
}

// hangingRouter's CheckStream reads messages and answers none.
func (h *hangingRouter) CheckStream(s grpc.BidiStreamingServer[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]) error {
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
		h.calls.Add(1)
	}
}

// A check whose router does not answer by the deadline (or whose stream
// is not open by then) gets the failure mode's answer, not an error, as a
// unary call does; so do later checks on the same stream. A canceled
// caller gets its context's error.
func TestStreamDeadline(t *testing.T) {
	h := startHangingRouter(t)
	cl := newClient(t, Options{Routers: []string{h.addr}, TLS: h.tls, Timeout: 100 * time.Millisecond, Stream: true, FailureMode: FailClosed})
	for i := range 3 {
		d, err := cl.Check(context.Background(), "shop", "/checkout", "u", 1)
		if err != nil || !d.FromFailureMode || d.Allowed {
			t.Fatalf("check %d: %+v, %v; want the failure mode's denial", i, d, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cl.Check(ctx, "shop", "/checkout", "u", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled caller: %v, want context.Canceled", err)
	}
}

// A router that restarts under a stream costs its callers nothing: checks
// in flight when it stops are answered (a stop answers what it has read)
// or sent again on a stream the client opens to the other router; once
// the restarted router is back on its address and the other one stops,
// the client opens a stream to it again. Every check is decided by a
// counter.
func TestStreamRouterRestart(t *testing.T) {
	rs := parseRules(t, `
rules:
  - {service: f, endpoint: /e, limit: 1000000000, period: 1s}
`)
	var listen atomic.Value
	listen.Store("127.0.0.1:0")
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Routers: 2, Rules: rs,
		Router: func(o *router.Options) { o.Listen = listen.Load().(string) }})
	addr := c.Routers[0].Addr()
	var streamed streamCounter
	cl := newClient(t, Options{TLS: c.TLS(creds.OperatorID), Routers: []string{addr, c.Routers[1].Addr()}, Timeout: clusterTimeout, Stream: true,
		DialOptions: withOpts(streamed.option())})
	var checks, failed atomic.Int64
	var errs sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := cl.CheckOne(context.Background(), Check{Service: "f", Endpoint: "/e", User: "u", Hits: 1})
				checks.Add(1)
				if err != nil || d.FromFailureMode || d.FailurePolicy || !d.Allowed {
					failed.Add(1)
					errs.Store(w, fmt.Sprintf("%+v %v", d, err))
				}
			}
		})
	}
	waitChecks := func(n int64) {
		from := checks.Load()
		poll.Until(t, 30*time.Second, func() error {
			if checks.Load() < from+n {
				return fmt.Errorf("%d checks so far", checks.Load()-from)
			}
			return nil
		})
	}
	waitChecks(200)
	stopRouter := func(r *router.Router) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Stop(ctx)
	}
	stopRouter(c.Routers[0])
	waitChecks(200)
	listen.Store(addr)
	c.StartRouter() // on the same address
	c.WaitMembers(1)
	stopRouter(c.Routers[1])
	waitChecks(500) // the restarted router is the only one serving
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		errs.Range(func(k, v any) bool { t.Logf("worker %v: %v", k, v); return true })
		t.Fatalf("%d of %d checks failed or were answered by failure mode", n, checks.Load())
	}
	if n := streamed.streams.Load(); n < 3 {
		t.Fatalf("%d streams opened, want one to each router and one to the restarted router", n)
	}
	t.Logf("%d checks in %d messages on %d streams", checks.Load(), streamed.messages.Load(), streamed.streams.Load())
}

// oldRouter serves only the unary Check (a router from before
// CheckStream), allowing every check.
type oldRouter struct {
	shardlimitv1.UnimplementedRateLimiterServer
	calls atomic.Int64
}

func (o *oldRouter) Check(_ context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	o.calls.Add(1)
	ds := make([]*shardlimitv1.Decision, len(req.Checks))
	for i := range ds {
		ds[i] = &shardlimitv1.Decision{Allowed: true, Rule: "old"}
	}
	return &shardlimitv1.CheckResponse{Decisions: ds}, nil
}

// Against a router older than CheckStream, which answers it
// UNIMPLEMENTED, a stream client decides over unary Check instead.
func TestStreamFallsBackToUnary(t *testing.T) {
	old := &oldRouter{}
	addr, tlsCfg := serveRouter(t, old)
	cl := newClient(t, Options{Routers: []string{addr}, TLS: tlsCfg, Timeout: clusterTimeout, Stream: true})
	for i := range 3 {
		d, err := cl.Check(context.Background(), "shop", "/checkout", "u", 1)
		if err != nil || !d.Allowed || d.FromFailureMode || d.Rule != "old" {
			t.Fatalf("check %d: %+v, %v; want the old router's answer", i, d, err)
		}
	}
	if n := old.calls.Load(); n != 3 {
		t.Fatalf("%d unary calls, want 3", n)
	}
}

// A check with invalid UTF-8 is refused by the client, before any RPC:
// over a stream it would cost the message it shares with others.
func TestCheckInvalidUTF8(t *testing.T) {
	cl := newClient(t, Options{Routers: []string{rpctest.DeadAddr(t)}, Timeout: clusterTimeout, Stream: true})
	for _, chk := range []Check{
		{Service: "shop", Endpoint: "/checkout", User: "\xff", Hits: 1},
		{Service: "shop", Endpoint: "/\xc3", User: "u", Hits: 1},
		{Service: "shop", Endpoint: "/checkout", APIKey: "k\x80", Hits: 1},
	} {
		if _, err := cl.CheckOne(context.Background(), chk); !errors.Is(err, ErrInvalidCheck) || !strings.Contains(err.Error(), "invalid UTF-8") {
			t.Errorf("%+v: %v, want ErrInvalidCheck naming invalid UTF-8", chk, err)
		}
	}
}

// With BatchWindow, a check of a service outside the caller's grant
// (PERMISSION_DENIED, which rejects the whole batch) gets its error
// without failing the checks it shared the batch with.
func TestBatchSplitsOnPermissionDenied(t *testing.T) {
	rs := parseRules(t, `
rules:
  - {service: shop, endpoint: /checkout, limit: 1000, period: 1h}
  - {service: other, endpoint: /e, limit: 10, period: 1h}
`)
	c, caOnly, token := shopCluster(t, 1, rs)
	var rpcs rpcCounter
	cl := newClient(t, Options{Routers: []string{c.Routers[0].Addr()}, TLS: caOnly, Token: token,
		Timeout: clusterTimeout, BatchWindow: clusterTimeout / 2, MaxBatch: 3, DialOptions: withOpts(rpcs.option())})
	var wg sync.WaitGroup
	for u := range 2 {
		wg.Go(func() {
			if d, err := cl.Check(context.Background(), "shop", "/checkout", fmt.Sprint("u", u), 1); err != nil || !d.Allowed || d.FromFailureMode {
				t.Errorf("user %d: %+v, %v; want decided", u, d, err)
			}
		})
	}
	wg.Go(func() {
		if _, err := cl.Check(context.Background(), "other", "/e", "x", 1); err == nil || !strings.Contains(err.Error(), "PermissionDenied") {
			t.Errorf("a service outside the grant: %v, want PermissionDenied", err)
		}
	})
	wg.Wait()
	if n := rpcs.rpcs.Load(); n != 4 {
		t.Errorf("%d RPCs, want 4: the batch of 3, then each check alone", n)
	}
}

// unimplementedMessages answers every CheckStream message UNIMPLEMENTED,
// the stream itself being served.
type unimplementedMessages struct{ oldRouter }

func (u *unimplementedMessages) CheckStream(s grpc.BidiStreamingServer[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		if err := s.Send(&shardlimitv1.CheckStreamResponse{Id: req.Id, Code: int32(codes.Unimplemented), Message: "no"}); err != nil {
			return err
		}
	}
}

// The unary fallback is for a router that refuses the stream itself: a
// message answered UNIMPLEMENTED does not turn it on; and once on, the
// stream is tried again after unaryFor.
func TestStreamUnaryFallbackOnlyForTheStream(t *testing.T) {
	u := &unimplementedMessages{}
	addr, tlsCfg := serveRouter(t, u)
	cl := newClient(t, Options{Routers: []string{addr}, TLS: tlsCfg, Timeout: clusterTimeout, Stream: true})
	for i := range 3 {
		if d, err := cl.Check(context.Background(), "shop", "/checkout", "u", 1); err != nil || !d.FromFailureMode {
			t.Fatalf("check %d: %+v, %v; want the failure mode's answer", i, d, err)
		}
	}
	if n := u.calls.Load(); n != 0 {
		t.Fatalf("%d unary calls after messages answered UNIMPLEMENTED, want 0", n)
	}

	old := &oldRouter{}
	var streamed streamCounter
	addr, tlsCfg = serveRouter(t, old)
	cl = newClient(t, Options{Routers: []string{addr}, TLS: tlsCfg, Timeout: clusterTimeout, Stream: true,
		DialOptions: withOpts(streamed.option())})
	check := func() {
		t.Helper()
		if d, err := cl.Check(context.Background(), "shop", "/checkout", "u", 1); err != nil || d.Rule != "old" {
			t.Fatalf("%+v, %v; want the old router's answer", d, err)
		}
	}
	check()
	check()
	if n := streamed.streams.Load(); n != 1 {
		t.Fatalf("%d streams tried, want 1 until unaryFor has passed", n)
	}
	cl.stream.unaryUntil.Store(time.Now().UnixNano()) // unaryFor has passed
	check()
	if n, calls := streamed.streams.Load(), old.calls.Load(); n != 2 || calls != 3 {
		t.Fatalf("%d streams tried, %d unary calls; want the stream tried again, then unary", n, calls)
	}
}

// A router that answers nothing on a stream is dropped at a message's
// deadline: the next check opens a new stream rather than queueing
// behind the wedged one.
func TestStreamWedgedRouterDropped(t *testing.T) {
	h := startHangingRouter(t)
	var streamed streamCounter
	cl := newClient(t, Options{Routers: []string{h.addr}, TLS: h.tls, Timeout: 50 * time.Millisecond, Stream: true,
		DialOptions: withOpts(streamed.option())})
	for i := range 2 {
		if d, err := cl.Check(context.Background(), "shop", "/checkout", "u", 1); err != nil || !d.FromFailureMode {
			t.Fatalf("check %d: %+v, %v; want the failure mode's answer", i, d, err)
		}
		poll.Until(t, 10*time.Second, func() error {
			cl.stream.mu.Lock()
			defer cl.stream.mu.Unlock()
			if cl.stream.cur != nil {
				return errors.New("the wedged stream is still the open one")
			}
			return nil
		})
	}
	if n := streamed.streams.Load(); n != 2 {
		t.Fatalf("%d streams opened, want one per check: the wedged one dropped at the deadline", n)
	}
}

// answeringRouter's CheckStream answers each message, allowing its checks
// by rule "answered", and records the users it was sent; with
// endAfterAnswer it ends the stream UNAVAILABLE after each answer, so
// that the answer and the stream's end reach the client together.
type answeringRouter struct {
	shardlimitv1.UnimplementedRateLimiterServer
	endAfterAnswer bool

	mu       sync.Mutex
	messages int
	users    []string
}

func (a *answeringRouter) CheckStream(s grpc.BidiStreamingServer[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		ds := make([]*shardlimitv1.Decision, len(req.Checks))
		a.mu.Lock()
		a.messages++
		for i, c := range req.Checks {
			a.users = append(a.users, c.User)
			ds[i] = &shardlimitv1.Decision{Allowed: true, Rule: "answered"}
		}
		a.mu.Unlock()
		if err := s.Send(&shardlimitv1.CheckStreamResponse{Id: req.Id, Decisions: ds}); err != nil {
			return err
		}
		if a.endAfterAnswer {
			return status.Error(codes.Unavailable, "the router went away after answering")
		}
	}
}

// sent returns the messages and the users the router was sent.
func (a *answeringRouter) sent() (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.messages, slices.Clone(a.users)
}

// An answer that arrives as its stream breaks is the check's decision:
// the message is not taken for lost and sent again, which would count its
// hits twice. The test hook holds each wait until the stream has ended,
// so that the answer and the end are both there when the client looks;
// a client that picked either at random sends about half of them twice.
func TestStreamAnswerAsStreamBreaksCountsOnce(t *testing.T) {
	a := &answeringRouter{endAfterAnswer: true}
	addr, tlsCfg := serveRouter(t, a)
	cl := newClient(t, Options{Routers: []string{addr}, TLS: tlsCfg, Timeout: clusterTimeout, Stream: true})
	cl.stream.sentHook = func(s *session) { <-s.done }
	const checks = 64
	for i := range checks {
		d, err := cl.Check(context.Background(), "shop", "/checkout", "u", 1)
		if err != nil || d.FromFailureMode || d.Rule != "answered" {
			t.Fatalf("check %d: %+v, %v; want the router's answer", i, d, err)
		}
	}
	if n, _ := a.sent(); n != checks {
		t.Fatalf("%d messages for %d checks: answered messages were sent again", n, checks)
	}
}

// A check whose deadline passed while it waited for a message is
// answered by the failure mode and left out of the message: the router
// never counts a hit whose caller has stopped waiting.
func TestStreamExpiredCheckNotSent(t *testing.T) {
	a := &answeringRouter{}
	addr, tlsCfg := serveRouter(t, a)
	cl := newClient(t, Options{Routers: []string{addr}, TLS: tlsCfg, Timeout: clusterTimeout, Stream: true, FailureMode: FailClosed})
	waiterOf := func(user string, deadline time.Time) *waiter {
		chk := Check{Service: "shop", Endpoint: "/checkout", User: user, Hits: 1}
		return &waiter{check: chk.proto(), deadline: deadline, done: make(chan result, 1)}
	}
	expired, live := waiterOf("late", time.Now()), waiterOf("live", time.Now().Add(clusterTimeout))
	cl.stream.send([]*waiter{expired, live})
	if r := <-expired.done; r.err != nil || !r.decision.FromFailureMode || r.decision.Allowed {
		t.Errorf("the expired check: %+v, %v; want the failure mode's denial", r.decision, r.err)
	}
	if r := <-live.done; r.err != nil || r.decision.FromFailureMode || r.decision.Rule != "answered" {
		t.Errorf("the live check: %+v, %v; want the router's answer", r.decision, r.err)
	}
	if n, users := a.sent(); n != 1 || !slices.Equal(users, []string{"live"}) {
		t.Errorf("the router was sent %d messages of users %q; want one of the live check only", n, users)
	}
}
