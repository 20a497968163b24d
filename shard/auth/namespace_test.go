package auth_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
)

// recorder serves Check (service role) and GetRules (operator role) and
// records who called.
type recorder struct {
	shardlimitv1.UnimplementedRateLimiterServer
	shardlimitv1.UnimplementedAdminServer
	mu     sync.Mutex
	caller string
}

func (r *recorder) record(ctx context.Context) {
	r.mu.Lock()
	r.caller = auth.FromContext(ctx).Name()
	r.mu.Unlock()
}

func (r *recorder) Check(ctx context.Context, _ *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	r.record(ctx)
	return &shardlimitv1.CheckResponse{}, nil
}

func (r *recorder) GetRules(ctx context.Context, _ *shardlimitv1.GetRulesRequest) (*shardlimitv1.GetRulesResponse, error) {
	r.record(ctx)
	return &shardlimitv1.GetRulesResponse{}, nil
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.caller
	r.caller = ""
	return c
}

// Certificates signed by the cluster's CA, over real TLS and gRPC: a URI
// grant matches only a SAN URI, a DNS grant only a SAN DNS name, a token
// grant no certificate at all. The audit's attacks (a certificate whose
// only SAN is the DNS name spiffe://shardlimit/operator, one with DNS:shop
// for the token-only identity shop) are refused.
func TestEachKindMatchesItsOwnNamespace(t *testing.T) {
	ca, err := creds.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	var clock atomic.Int64 // the server's clock, moved by the test
	clock.Store(t0.UnixNano())
	shopToken, shopStored, _ := auth.NewToken(t0)
	envoyToken, envoyStored, _ := auth.NewTokenTTL(t0, time.Hour)
	a, err := auth.New(auth.Options{Component: "test", Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	a.SetGrants(auth.NewSet([]auth.Grant{
		{ID: "uri:" + creds.OperatorID, Role: auth.RoleOperator},
		{ID: "token:shop", Role: auth.RoleService, Services: []string{"shop"}, Tokens: []auth.Token{shopStored}},
		{ID: "dns:edge.example.com", Role: auth.RoleService, Services: []string{"shop"}},
		// Written before kinds: a URI grant and a token grant.
		{ID: creds.RouterID, Role: auth.RoleInternal},
		{ID: "envoy", Role: auth.RoleService, Services: []string{"shop"}, Tokens: []auth.Token{envoyStored}},
	}), 0)

	rec := &recorder{}
	srvCert, err := ca.IssuePair(creds.Leaf{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(a.ServerOptions(), grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12,
	})))...)
	shardlimitv1.RegisterRateLimiterServer(srv, rec)
	shardlimitv1.RegisterAdminServer(srv, rec)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	dial := func(leaf *creds.Leaf) *grpc.ClientConn {
		cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}
		if leaf != nil {
			pair, err := ca.IssuePair(*leaf)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	check := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := shardlimitv1.NewRateLimiterClient(conn).Check(ctx, &shardlimitv1.CheckRequest{})
		return err
	}
	getRules := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := shardlimitv1.NewAdminClient(conn).GetRules(ctx, &shardlimitv1.GetRulesRequest{})
		return err
	}
	bearer := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	}
	bg := context.Background()
	for _, tc := range []struct {
		name   string
		leaf   *creds.Leaf
		ctx    context.Context
		call   func(context.Context, *grpc.ClientConn) error
		code   codes.Code
		caller string
	}{
		{"attack: DNS name spiffe://shardlimit/operator as operator", &creds.Leaf{DNSNames: []string{creds.OperatorID}}, bg, getRules, codes.Unauthenticated, ""},
		{"attack: DNS name shop as the token-only shop", &creds.Leaf{DNSNames: []string{"shop"}}, bg, check, codes.Unauthenticated, ""},
		{"attack: DNS name envoy as a token grant written before kinds", &creds.Leaf{DNSNames: []string{"envoy"}}, bg, check, codes.Unauthenticated, ""},
		{"attack: SAN URI dns:edge.example.com as the DNS grant", &creds.Leaf{URIs: []string{"dns:edge.example.com"}}, bg, check, codes.Unauthenticated, ""},
		{"attack: SAN URI token:shop as the token grant", &creds.Leaf{URIs: []string{"token:shop"}}, bg, check, codes.Unauthenticated, ""},
		{"SAN URI of the operator", &creds.Leaf{URIs: []string{creds.OperatorID}}, bg, getRules, codes.OK, "uri:" + creds.OperatorID},
		{"SAN URI of a grant written before kinds", &creds.Leaf{URIs: []string{creds.RouterID}, DNSNames: []string{"localhost"}}, bg, getRules, codes.PermissionDenied, ""},
		{"DNS grant, any case", &creds.Leaf{DNSNames: []string{"other.example.com", "EDGE.example.com"}}, bg, check, codes.OK, "dns:edge.example.com"},
		{"token of shop", nil, bearer(shopToken), check, codes.OK, "token:shop"},
		{"token of envoy, written before kinds, not yet expired", nil, bearer(envoyToken), check, codes.OK, "token:envoy"},
	} {
		err := tc.call(tc.ctx, dial(tc.leaf))
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
		if got := rec.last(); got != tc.caller {
			t.Errorf("%s: served as %q, want %q", tc.name, got, tc.caller)
		}
	}

	// An hour later envoy's token has expired: Unauthenticated, saying so.
	clock.Store(t0.Add(time.Hour).UnixNano())
	err = check(bearer(envoyToken), dial(nil))
	if status.Code(err) != codes.Unauthenticated || status.Convert(err).Message() != auth.ErrTokenExpired.Error() {
		t.Errorf("expired token: %v, want Unauthenticated: %v", err, auth.ErrTokenExpired)
	}
	if err := check(bearer(shopToken), dial(nil)); err != nil {
		t.Errorf("a token without expiry, an hour later: %v", err)
	}
}
