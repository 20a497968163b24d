package router_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// By default every hop is mTLS: callers → router, router → shards. A
// plain-text caller is refused by the handshake, a TLS caller without a
// certificate or a token is Unauthenticated.
func TestMutualTLSOnEveryHop(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t)})
	req := &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "tls"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard: the first mTLS handshakes are slow under load
	defer cancel()
	resp, err := c.Client(0).Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; !d.Allowed || d.FailurePolicy || d.Remaining != 9 {
		t.Fatalf("over mTLS: %v (the router must reach the shards over mTLS too)", d)
	}
	dial := func(creds grpc.DialOption) shardlimitv1.RateLimiterClient {
		conn, err := grpc.NewClient(c.Routers[0].Addr(), creds)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return shardlimitv1.NewRateLimiterClient(conn)
	}
	caOnly, err := creds.ClientTLS(creds.Files{CA: c.PKI.Router.CA}, creds.LocalServerName)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		creds grpc.DialOption
		code  codes.Code
	}{
		"plain text":                     {grpc.WithTransportCredentials(insecure.NewCredentials()), codes.Unavailable},
		"no client certificate or token": {grpc.WithTransportCredentials(credentials.NewTLS(caOnly)), codes.Unauthenticated},
		"a certificate of another CA":    {grpc.WithTransportCredentials(credentials.NewTLS(otherCA(t))), codes.Unavailable},
	} {
		// Each refusal comes at once; the deadline only bounds a hang, so
		// that a handshake slowed by load is not taken for a refusal.
		bound, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := dial(tc.creds).Check(bound, req)
		cancel()
		if status.Code(err) != tc.code {
			t.Errorf("%s caller: %v, want %v", name, err, tc.code)
		}
	}
}

// otherCA returns a client TLS config with an operator certificate of
// another CA, which trusts the cluster's servers.
func otherCA(t *testing.T) *tls.Config {
	t.Helper()
	pki, err := creds.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := creds.ClientTLS(pki.Operator, creds.LocalServerName)
	if err != nil {
		t.Fatal(err)
	}
	cfg.VerifyConnection, cfg.InsecureSkipVerify = nil, true // trust any server: only the router's check of the client is tested
	return cfg
}
