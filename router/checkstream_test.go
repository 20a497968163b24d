package router_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/poll"
)

type checkStream = grpc.BidiStreamingClient[shardlimitv1.CheckStreamRequest, shardlimitv1.CheckStreamResponse]

// openStream opens a CheckStream on cl, closed with the test.
func openStream(t *testing.T, cl shardlimitv1.RateLimiterClient) checkStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := cl.CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func shopChecks(n int, user string) []*shardlimitv1.Check {
	cs := make([]*shardlimitv1.Check, n)
	for i := range cs {
		cs[i] = &shardlimitv1.Check{Service: "shop", Endpoint: "/checkout", User: fmt.Sprintf("%s-%d", user, i), Hits: proto.Int64(0)}
	}
	return cs
}

// roundTrip sends one message and returns the next answer.
func roundTrip(t *testing.T, s checkStream, req *shardlimitv1.CheckStreamRequest) (*shardlimitv1.CheckStreamResponse, error) {
	t.Helper()
	if err := s.Send(req); err != nil {
		return nil, err
	}
	return s.Recv()
}

// A grant changed while a stream is open applies to the stream's next
// message: a service taken out of the grant refuses its checks with
// PERMISSION_DENIED (the stream goes on, as for any refused message), and
// a grant deleted refuses the next message with UNAUTHENTICATED and ends
// the stream with it. The caller is identified again for each message,
// not only when the stream opened.
func TestCheckStreamRevokedGrant(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t),
		Grants: []auth.Grant{{ID: "token:shop", Role: auth.RoleService, Services: []string{"shop"}}}})
	s := openStream(t, shardlimitv1.NewRateLimiterClient(c.WithToken(c.Routers[0].Addr(), c.Token("token:shop"))))
	resp, err := roundTrip(t, s, &shardlimitv1.CheckStreamRequest{Id: 1, Checks: shopChecks(1, "u")})
	if err != nil || resp.Code != 0 || len(resp.Decisions) != 1 {
		t.Fatalf("before the revocation: %v, %v", resp, err)
	}
	id := uint64(1)
	refusedWith := func(want codes.Code) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() error {
			id++
			resp, err := roundTrip(t, s, &shardlimitv1.CheckStreamRequest{Id: id, Checks: shopChecks(1, "u")})
			if err != nil {
				t.Fatalf("message %d: %v, want an answer", id, err)
			}
			if codes.Code(resp.Code) != want || resp.Id != id {
				return fmt.Errorf("message %d: answered %v, want %v", id, resp, want)
			}
			return nil
		})
	}
	c.Grant(auth.Grant{ID: "token:shop", Role: auth.RoleService, Services: []string{"bank"}})
	refusedWith(codes.PermissionDenied)
	if _, err := c.Admin(0).Revoke(context.Background(), &shardlimitv1.RevokeRequest{Id: "token:shop"}); err != nil {
		t.Fatal(err)
	}
	refusedWith(codes.Unauthenticated)
	if _, err := s.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("after the refusal: %v, want the stream ended with Unauthenticated", err)
	}
}

// A message with invalid UTF-8 is answered by its id with
// INVALID_ARGUMENT naming the field, and the stream goes on.
func TestCheckStreamInvalidUTF8(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t)})
	s := openStream(t, c.Client(0))
	bad, err := (&shardlimitv1.CheckStreamRequest{Id: 7, Checks: shopChecks(1, "\xff")}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	raw := &emptypb.Empty{} // sent as is: a proto marshaler would refuse it
	raw.ProtoReflect().SetUnknown(bad)
	if err := s.SendMsg(raw); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Recv()
	if err != nil || resp.Id != 7 || codes.Code(resp.Code) != codes.InvalidArgument || !strings.Contains(resp.Message, "checks[0].user: invalid UTF-8") {
		t.Fatalf("invalid UTF-8: %v, %v; want message 7 answered INVALID_ARGUMENT naming checks[0].user", resp, err)
	}
	resp, err = roundTrip(t, s, &shardlimitv1.CheckStreamRequest{Id: 8, Checks: shopChecks(1, "u")})
	if err != nil || resp.Id != 8 || resp.Code != 0 || len(resp.Decisions) != 1 {
		t.Fatalf("the next message: %v, %v; want it decided", resp, err)
	}
}

// A stream ends with OK, every message it read answered, before its
// connection's MaxConnectionAge (and grace) would cut it: a stream opened
// on an aged connection is not broken under its messages.
func TestCheckStreamEndsBeforeConnectionAge(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t),
		Router: func(o *router.Options) {
			o.Limits.MaxConnectionAge, o.Limits.MaxConnectionAgeGrace = time.Second, 400*time.Millisecond
		}})
	cl := shardlimitv1.NewRateLimiterClient(c.Operator(c.Routers[0].Addr()))
	s := openStream(t, cl)
	for id := uint64(1); ; id++ {
		resp, err := roundTrip(t, s, &shardlimitv1.CheckStreamRequest{Id: id, Checks: shopChecks(1, "u")})
		if errors.Is(err, io.EOF) {
			t.Logf("the stream ended with OK after %d messages", id-1)
			return
		}
		if err != nil {
			t.Fatalf("message %d: %v; want the stream ended with OK before the connection closed", id, err)
		}
		if resp.Id != id || resp.Code != 0 {
			t.Fatalf("message %d: answered %v", id, resp)
		}
	}
}

// An answer the router cannot send (over its MaxSendMsgSize) ends the
// stream with that error: the router does not go on deciding messages it
// cannot answer, nor end with OK, which would tell the caller that its
// unanswered messages were never decided.
func TestCheckStreamSendFailureEndsStream(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t),
		Router: func(o *router.Options) { o.Limits.MaxSendMsgSize = 1 << 10 }})
	// The stream's deadline only guards against a hang: without the fix
	// the router never answers, and the stream would wait for ever.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Client(0).CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&shardlimitv1.CheckStreamRequest{Id: 1, Checks: shopChecks(100, "u")}); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%v, %v; want the stream ended with RESOURCE_EXHAUSTED", resp, err)
	}
}

// Many messages sent at once, past the router's bound of messages in
// flight, are all answered; a router that stops ends the stream with OK.
func TestCheckStreamManyThenStop(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t)})
	s := openStream(t, c.Client(0))
	const n = 50
	for id := uint64(1); id <= n; id++ {
		if err := s.Send(&shardlimitv1.CheckStreamRequest{Id: id, Checks: shopChecks(1, "u")}); err != nil {
			t.Fatal(err)
		}
	}
	answered := 0
	for answered < n {
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("after %d answers: %v", answered, err)
		}
		if resp.Code != 0 {
			t.Fatalf("answer %v", resp)
		}
		answered++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Routers[0].Stop(ctx)
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the stop: %v, want the stream ended with OK", err)
	}
}

// A token that expires while its stream is open refuses the stream's next
// message UNAUTHENTICATED, and the stream ends with it: the expiry is
// judged for each message, not only when the stream opened.
func TestCheckStreamTokenExpires(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t),
		Grants: []auth.Grant{{ID: "token:shop", Role: auth.RoleService, Services: []string{"shop"}}}})
	token, stored, err := auth.NewToken(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(5 * time.Second)
	stored.Expires = expires
	c.Grant(auth.Grant{ID: "token:shop", Role: auth.RoleService, Services: []string{"shop"}, Tokens: []auth.Token{stored}})
	cl := shardlimitv1.NewRateLimiterClient(c.WithToken(c.Routers[0].Addr(), token))
	// Once the router knows the token, a stream opened with it decides.
	var s checkStream
	poll.Until(t, time.Until(expires), func() error {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		var err error
		if s, err = cl.CheckStream(ctx); err != nil {
			return err
		}
		resp, err := roundTrip(t, s, &shardlimitv1.CheckStreamRequest{Id: 1, Checks: shopChecks(1, "u")})
		if err != nil || resp.Code != 0 {
			return fmt.Errorf("%v, %v", resp, err)
		}
		return nil
	})
	id := uint64(1)
	poll.Until(t, time.Until(expires)+10*time.Second, func() error {
		id++
		resp, err := roundTrip(t, s, &shardlimitv1.CheckStreamRequest{Id: id, Checks: shopChecks(1, "u")})
		if err != nil {
			t.Fatalf("message %d: %v, want an answer", id, err)
		}
		if codes.Code(resp.Code) != codes.Unauthenticated {
			return fmt.Errorf("message %d answered %v at %v before the expiry", id, resp, time.Until(expires))
		}
		return nil
	})
	if time.Now().Before(expires) {
		t.Fatalf("refused %v before the token expired", time.Until(expires))
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("after the refusal: %v, want the stream ended with Unauthenticated", err)
	}
}

// fakeStream is a CheckStream's server side for a handler called in
// process: RecvMsg hands out the messages of next, and Send waits for
// sendGate (or the stream's end, as gRPC's flow control would).
type fakeStream struct {
	grpc.ServerStream
	ctx      context.Context
	next     func(n int) *shardlimitv1.CheckStreamRequest // the n-th message (from 1); nil: the caller closed its side
	sendGate chan struct{}

	mu       sync.Mutex
	recvd    int // messages handed out
	sent     int // answers sent
	sending  int // Sends waiting at the gate
	maxAhead int // the most messages handed out and unanswered
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) RecvMsg(m any) error {
	f.mu.Lock()
	n := f.recvd + 1
	f.mu.Unlock()
	req := f.next(n)
	if req == nil {
		return io.EOF
	}
	b, err := req.MarshalVT()
	if err != nil {
		return err
	}
	m.(proto.Message).ProtoReflect().SetUnknown(b)
	f.mu.Lock()
	f.recvd = n
	f.maxAhead = max(f.maxAhead, f.recvd-f.sent)
	f.mu.Unlock()
	return nil
}

func (f *fakeStream) Recv() (*shardlimitv1.CheckStreamRequest, error) {
	var raw emptypb.Empty
	if err := f.RecvMsg(&raw); err != nil {
		return nil, err
	}
	m := &shardlimitv1.CheckStreamRequest{}
	return m, m.UnmarshalVT(raw.ProtoReflect().GetUnknown())
}

func (f *fakeStream) Send(*shardlimitv1.CheckStreamResponse) error {
	f.mu.Lock()
	f.sending++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.sending--
		f.mu.Unlock()
	}()
	select {
	case <-f.sendGate:
	case <-f.ctx.Done():
		return status.FromContextError(f.ctx.Err()).Err()
	}
	f.mu.Lock()
	f.sent++
	f.mu.Unlock()
	return nil
}

// state returns the messages handed out and the Sends waiting.
func (f *fakeStream) state() (recvd, sending int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recvd, f.sending
}

// startFakeStream runs router r's CheckStream handler on a fakeStream of
// an operator's messages (one check each, of user u): a caller that sends
// messages of them and closes its side (0: never), each Send held until
// gate closes. The handler's result arrives on the returned channel.
func startFakeStream(t *testing.T, r *router.Router, gate chan struct{}, messages int) (*fakeStream, context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(auth.NewContext(context.Background(), &auth.Identity{ID: "test:operator", Role: auth.RoleOperator}))
	t.Cleanup(cancel)
	f := &fakeStream{ctx: ctx, sendGate: gate,
		next: func(n int) *shardlimitv1.CheckStreamRequest {
			if messages > 0 && n > messages {
				return nil
			}
			return &shardlimitv1.CheckStreamRequest{Id: uint64(n), Checks: shopChecks(1, "u")}
		}}
	done := make(chan error, 1)
	go func() { done <- r.CheckStream(f) }()
	return f, cancel, done
}

// A caller that reads no answers holds the router's Sends (flow control):
// the handler reads no more than its bound of messages in flight
// (streamInFlight, 8, decided and waiting to be answered) and 2 more, and
// once the answers flow it reads on, never more than that ahead.
func TestCheckStreamInFlightBound(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t)})
	const bound, messages = 8 + 2, 60
	gate := make(chan struct{})
	f, _, done := startFakeStream(t, c.Routers[0], gate, messages)
	poll.Until(t, 30*time.Second, func() error {
		if recvd, sending := f.state(); recvd < bound || sending == 0 {
			return fmt.Errorf("%d messages read, %d answers waiting to be sent", recvd, sending)
		}
		return nil
	})
	close(gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the handler ended with %v, want OK once the caller closed its side", err)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the handler did not end")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recvd != messages || f.sent != messages || f.maxAhead != bound {
		t.Fatalf("%d messages read, %d answered, at most %d read and unanswered; want %d, %d, %d",
			f.recvd, f.sent, f.maxAhead, messages, messages, bound)
	}
}

// A handler whose Sends are blocked (a caller that reads nothing) ends
// when the caller goes away: nothing stays blocked in Send nor waits for
// a slot, and the handler returns the stream's end.
func TestCheckStreamBlockedSendEndsHandler(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t)})
	f, cancel, done := startFakeStream(t, c.Routers[0], make(chan struct{}), 0) // the gate never opens
	poll.Until(t, 30*time.Second, func() error {
		if recvd, sending := f.state(); recvd < 8+2 || sending == 0 {
			return fmt.Errorf("%d messages read, %d answers waiting to be sent", recvd, sending)
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if status.Code(err) != codes.Canceled {
			t.Fatalf("the handler ended with %v, want CANCELED", err)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the handler did not end with its Sends blocked")
	}
	if _, sending := f.state(); sending != 0 {
		t.Fatalf("%d Sends still blocked after the handler returned", sending)
	}
}
