package envoy_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/envoy"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

const clusterRules = `
rules:
  - service: edge
    name: ip-checkout
    descriptor: [{key: remote_address}, {key: path, value: /checkout}]
    limit: 3
    period: 1m
  - service: edge
    name: global
    descriptor: [{key: generic_key, value: global}]
    limit: 100
    period: 2m
`

// serve starts the service on its own gRPC server over router 0 of c and
// returns a client, as Envoy's rate limit filter would hold one. It works
// whether or not the router registers the service on its own server.
func serve(t *testing.T, c *clustertest.Cluster, opts envoy.Options) rlsv3.RateLimitServiceClient {
	t.Helper()
	opts.Logger = clustertest.Logger()
	s := grpc.NewServer(c.ServerOptions()...)
	envoy.Register(s, c.Routers[0], opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return rlsv3.NewRateLimitServiceClient(c.Operator(lis.Addr().String()))
}

// checkout is the descriptor Envoy sends for a request from ip to
// /checkout with actions remote_address and request_headers(:path → path).
func checkout(ip string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
		{Key: "remote_address", Value: ip}, {Key: "path", Value: "/checkout"},
	}}
}

func ask(t *testing.T, cl rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	// A hang guard, above the routers' deadline, so that a slow shard on a
	// loaded machine is answered for by the router, not taken for a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	if len(resp.Statuses) != len(req.Descriptors) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
	}
	return resp
}

func headerMap(hs []*corev3.HeaderValue) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = h.Value
	}
	return m
}

func TestEnvoyRateLimitService(t *testing.T) {
	rs, err := rules.Parse("envoy.yaml", []byte(clusterRules))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: rs})
	cl := serve(t, c, envoy.Options{Headers: true})
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT

	t.Run("OK until the limit, then OVER_LIMIT", func(t *testing.T) {
		for i, hits := range []uint32{0, 1, 1} { // 0: absent, counts 1
			resp := ask(t, cl, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.1")}, HitsAddend: hits})
			st := resp.Statuses[0]
			lim := st.CurrentLimit
			if resp.OverallCode != ok || st.Code != ok || lim.GetName() != "ip-checkout" || lim.GetRequestsPerUnit() != 3 ||
				lim.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || lim.GetUnitMultiplier() != nil ||
				st.LimitRemaining != uint32(2-i) || st.DurationUntilReset.AsDuration() <= 0 || st.DurationUntilReset.AsDuration() > time.Minute {
				t.Fatalf("request %d: %v", i, resp)
			}
			h := headerMap(resp.ResponseHeadersToAdd)
			if h[envoy.HeaderPolicy] != `"ip-checkout";q=3;w=60` || !strings.HasPrefix(h[envoy.HeaderRateLimit], `"ip-checkout";r=`+strconv.Itoa(2-i)+";t=") {
				t.Fatalf("request %d: headers %v", i, h)
			}
			if _, ok := h[envoy.HeaderRetryAfter]; ok {
				t.Fatalf("request %d: Retry-After while allowed: %v", i, h)
			}
		}
		resp := ask(t, cl, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.1")}, HitsAddend: 1})
		st := resp.Statuses[0]
		if resp.OverallCode != over || st.Code != over || st.CurrentLimit.GetRequestsPerUnit() != 3 || st.LimitRemaining != 0 ||
			st.DurationUntilReset.AsDuration() <= 0 || st.DurationUntilReset.AsDuration() > time.Minute {
			t.Fatalf("over the limit: %v", resp)
		}
		h := headerMap(resp.ResponseHeadersToAdd)
		retry, err := strconv.Atoi(h[envoy.HeaderRetryAfter])
		if err != nil || retry < 1 || retry > 60 {
			t.Fatalf("Retry-After %q, want 1..60", h[envoy.HeaderRetryAfter])
		}
		if want := `"ip-checkout";r=0;t=` + strconv.Itoa(retry); h[envoy.HeaderRateLimit] != want {
			t.Fatalf("RateLimit %q, want %q", h[envoy.HeaderRateLimit], want)
		}
		t.Logf("over the limit: %v", h)
	})

	t.Run("another address has its own counter", func(t *testing.T) {
		resp := ask(t, cl, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.2")}, HitsAddend: 2})
		if st := resp.Statuses[0]; resp.OverallCode != ok || st.LimitRemaining != 1 {
			t.Fatalf("%v", resp)
		}
	})

	t.Run("per-descriptor hits_addend and a shared counter", func(t *testing.T) {
		global := func() *ratelimitv3.RateLimitDescriptor {
			return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "global"}}}
		}
		heavy := global()
		heavy.HitsAddend = wrapperspb.UInt64(10) // wins over the request's 5
		resp := ask(t, cl, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{global(), heavy}, HitsAddend: 5})
		first, second := resp.Statuses[0], resp.Statuses[1]
		lim := first.CurrentLimit
		if resp.OverallCode != ok || first.LimitRemaining != 95 || second.LimitRemaining != 85 ||
			lim.GetRequestsPerUnit() != 100 || lim.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || lim.GetUnitMultiplier().GetValue() != 2 {
			t.Fatalf("%v", resp)
		}
		if h := headerMap(resp.ResponseHeadersToAdd); h[envoy.HeaderPolicy] != `"global";q=100;w=120` || !strings.HasPrefix(h[envoy.HeaderRateLimit], `"global";r=85;t=`) {
			t.Fatalf("headers %v", h)
		}
	})

	t.Run("unknown domain is OK", func(t *testing.T) {
		resp := ask(t, cl, &rlsv3.RateLimitRequest{Domain: "nobody", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.1")}})
		if st := resp.Statuses[0]; resp.OverallCode != ok || st.Code != ok || st.CurrentLimit != nil || resp.ResponseHeadersToAdd != nil {
			t.Fatalf("%v", resp)
		}
	})

	t.Run("unmatched descriptor is OK without a limit", func(t *testing.T) {
		cart := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}, {Key: "path", Value: "/cart"}}}
		resp := ask(t, cl, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.1"), cart}})
		if resp.OverallCode != over || resp.Statuses[0].Code != over {
			t.Fatalf("matched descriptor: %v", resp)
		}
		if st := resp.Statuses[1]; st.Code != ok || st.CurrentLimit != nil || st.LimitRemaining != 0 || st.DurationUntilReset != nil {
			t.Fatalf("unmatched descriptor: %v", st)
		}
	})

	t.Run("no headers unless enabled", func(t *testing.T) {
		plain := serve(t, c, envoy.Options{})
		resp := ask(t, plain, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.1")}})
		if resp.OverallCode != over || resp.ResponseHeadersToAdd != nil || resp.Statuses[0].CurrentLimit == nil {
			t.Fatalf("%v", resp)
		}
	})

	t.Run("bad input is INVALID_ARGUMENT", func(t *testing.T) {
		for _, tc := range []struct {
			req   *rlsv3.RateLimitRequest
			field string
		}{
			{&rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.3")}}, "domain: required"},
			{&rlsv3.RateLimitRequest{Domain: "edge"}, "descriptors: at least 1"},
			{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.3")}, HitsAddend: 2_000_000_000}, "hits_addend: 2000000000 exceeds the maximum of 1000000000"},
			{&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.3"), {Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Value: "x"}}}}}, "descriptors[1].entries[0].key: required"},
		} {
			_, err := cl.ShouldRateLimit(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.field) {
				t.Errorf("%s: %v, want InvalidArgument naming it", tc.field, err)
			}
		}
		// Invalid UTF-8, sent as raw bytes to the router's own server (a
		// generated client will not encode it): INVALID_ARGUMENT naming the
		// field, never echoing the value.
		conn := c.Operator(c.Routers[0].Addr())
		entry := func(k, v string) []byte { return rpctest.String(rpctest.String(nil, 1, k), 2, v) }
		descriptor := func(ip string) []byte {
			return rpctest.Message(rpctest.Message(nil, 1, entry("remote_address", ip)), 1, entry("path", "/checkout"))
		}
		for field, req := range map[string][]byte{
			"domain":                          rpctest.Message(rpctest.String(nil, 1, "ed\xffge"), 2, descriptor("10.0.0.3")),
			"descriptors[1].entries[0].value": rpctest.Message(rpctest.Message(rpctest.String(nil, 1, "edge"), 2, descriptor("10.0.0.3")), 2, descriptor("10.0.0.\xfe")),
		} {
			err := rpctest.Invoke(context.Background(), conn, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, req)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != field+": invalid UTF-8" {
				t.Errorf("invalid UTF-8 in %s: %v", field, err)
			}
		}
		// Nothing was counted by the rejected requests.
		resp := ask(t, cl, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout("10.0.0.3")}})
		if resp.Statuses[0].LimitRemaining != 2 {
			t.Fatalf("after rejected requests: %v", resp)
		}
	})
}

// A descriptor whose shard is dead is answered by failure policy, and the
// answer says so in its dynamic metadata, which Envoy's access log and
// bench read: unlike an unmatched descriptor, which is OK without a limit
// too, and unlike the descriptors the live shard decided.
func TestFailurePolicyIsMarked(t *testing.T) {
	rs, err := rules.Parse("envoy.yaml", []byte(clusterRules))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: rs, Shard: func(o *shard.Options) {
		o.LeaseTTL = time.Minute // the dead shard keeps its partitions for the whole test
	}})
	cl := serve(t, c, envoy.Options{})
	victim := c.Shards[0]
	// Addresses whose counters the victim owns and one a live shard owns,
	// and a descriptor no rule matches.
	var dead, live []string
	for i := 1; len(dead) < 2 || len(live) < 1; i++ {
		ip := "10.2.0." + strconv.Itoa(i)
		if c.Owner("edge", "ip-checkout", ip).ID == victim.ID() {
			dead = append(dead, ip)
		} else {
			live = append(live, ip)
		}
	}
	unmatched := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "path", Value: "/none"}}}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{checkout(dead[0]), checkout(live[0]), unmatched, checkout(dead[1])}}
	if resp := ask(t, cl, req); resp.DynamicMetadata != nil {
		t.Fatalf("every shard up, yet marked: %v", resp.DynamicMetadata)
	}
	victim.Kill()

	resp := ask(t, cl, req)
	byPolicy, reason := envoy.FailurePolicyOf(resp)
	if want := []bool{true, false, false, true}; !slices.Equal(byPolicy, want) || reason != envoy.ReasonShardUnreachable {
		t.Fatalf("marked %v (%q), want %v (%s): %v", byPolicy, reason, want, envoy.ReasonShardUnreachable, resp)
	}
	for i, st := range resp.Statuses {
		// Allowed by the rule's policy (allow), with no limit: the mark is
		// what tells descriptor 0 from descriptor 2.
		if st.Code != rlsv3.RateLimitResponse_OK || (st.CurrentLimit != nil) != (i == 1) {
			t.Errorf("descriptor %d: %v", i, st)
		}
	}
	if resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Errorf("overall %v, want OK (fail open)", resp.OverallCode)
	}
}
