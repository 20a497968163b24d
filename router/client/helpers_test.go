package client

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

func testRules(t *testing.T) []rules.Rule {
	t.Helper()
	return parseRules(t, `
rules:
  - service: shop
    endpoint: /checkout
    name: checkout
    limit: 10
    period: 1m
`)
}

// parseRules parses a rules file, failing the test if it is invalid.
func parseRules(t *testing.T, doc string) []rules.Rule {
	t.Helper()
	rs, err := rules.Parse(t.Name()+".yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// newClient makes a client with o; one without TLS trusts a CA of its
// own, which is enough to call a dead address.
func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	if o.TLS == nil && !o.Insecure {
		o.TLS = newPKI(t).client
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rpcCounter counts the client's RPC attempts per router and the checks
// they carry, from a unary interceptor (one call per attempt).
type rpcCounter struct {
	mu       sync.Mutex
	attempts map[string]int // router address → attempts
	rpcs     atomic.Int64
	checks   atomic.Int64
}

func (c *rpcCounter) option() grpc.DialOption {
	c.attempts = map[string]int{}
	return grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.mu.Lock()
		c.attempts[cc.Target()[len("passthrough:///"):]]++
		c.mu.Unlock()
		c.rpcs.Add(1)
		c.checks.Add(int64(len(req.(*shardlimitv1.CheckRequest).Checks)))
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

func (c *rpcCounter) to(addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts[addr]
}

// hangingRouter serves the public API and never answers: every Check waits
// until its deadline.
type hangingRouter struct {
	shardlimitv1.UnimplementedRateLimiterServer
	calls atomic.Int64
	addr  string
	tls   *tls.Config // for clients
}

// testPKI is a CA's server TLS config (the router certificate) and client
// TLS config (the operator certificate).
type testPKI struct{ server, client *tls.Config }

func newPKI(t *testing.T) testPKI {
	t.Helper()
	lt := rpctest.NewLocalTLS(t)
	return testPKI{server: lt.Server, client: lt.Operator}
}

func startHangingRouter(t *testing.T) *hangingRouter {
	t.Helper()
	h := &hangingRouter{}
	h.addr, h.tls = serveRouter(t, h)
	return h
}

// serveRouter serves srv as a router over TLS, stopped with the test, and
// returns its address and the TLS config that its clients use.
func serveRouter(t *testing.T, srv shardlimitv1.RateLimiterServer) (string, *tls.Config) {
	t.Helper()
	pki := newPKI(t)
	addr := rpctest.Serve(t, func(s *grpc.Server) { shardlimitv1.RegisterRateLimiterServer(s, srv) }, grpc.Creds(credentials.NewTLS(pki.server)))
	return addr, pki.client
}

func (h *hangingRouter) Check(ctx context.Context, _ *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func withOpts(o ...grpc.DialOption) []grpc.DialOption { return o }

// shopCluster starts a cluster of shards with rs and a grant of service
// shop to "token:shop", and returns it with the TLS that trusts its
// routers and that token: the callers of the stream and batch tests.
func shopCluster(t *testing.T, shards int, rs []rules.Rule) (*clustertest.Cluster, *tls.Config, creds.TokenFunc) {
	t.Helper()
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: shards, Rules: rs,
		Grants: []auth.Grant{{ID: "token:shop", Role: auth.RoleService, Services: []string{"shop"}}}})
	caOnly, err := creds.ClientTLS(creds.Files{CA: c.PKI.Router.CA}, creds.LocalServerName)
	if err != nil {
		t.Fatal(err)
	}
	return c, caOnly, creds.StaticToken(c.Token("token:shop"))
}
