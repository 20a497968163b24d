package router_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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
