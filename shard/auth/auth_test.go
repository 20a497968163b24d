package auth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/metrictest"
)

func TestGrantValidateNamesEveryField(t *testing.T) {
	for _, tc := range []struct {
		g    Grant
		want []string
	}{
		{Grant{}, []string{"id: required", "role: required"}},
		{Grant{ID: "a b", Role: RoleOperator}, []string{"id: must be printable ASCII without spaces"}},
		{Grant{ID: strings.Repeat("x", MaxIDLength+1), Role: RoleOperator}, []string{"id: 257 bytes exceed the maximum of 256"}},
		{Grant{ID: "x", Role: "admin"}, []string{`role: "admin" is not one of service, operator, internal`}},
		{Grant{ID: "x", Role: RoleService}, []string{"services: at least one is required"}},
		{Grant{ID: "x", Role: RoleInternal, Services: []string{"shop"}}, []string{"services: only role service holds services"}},
		{Grant{ID: "x", Role: RoleService, Services: []string{"shop", "", "a/b", "shop"}}, []string{"services[1]: empty", "services[2]: must be valid UTF-8 without '/'", `services[3]: "shop" is listed twice`}},
		{Grant{ID: "x", Role: RoleOperator, Tokens: []Token{{ID: "t", SHA256: "zz"}, {ID: "t", SHA256: strings.Repeat("a", 64)}}}, []string{"tokens[0].sha256: not a hex SHA-256", `tokens[1].id: "t" is listed twice`}},
	} {
		err := tc.g.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v, want it to contain %q", tc.g, err, w)
			}
		}
	}
	if err := (&Grant{ID: "spiffe://shardlimit/router", Role: RoleInternal}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestParseFileReportsEveryGrant(t *testing.T) {
	_, err := Parse("g.yaml", []byte("grants:\n  - {id: a, role: operator}\n  - {id: a, role: internal}\n  - {id: b, role: boss}\n"))
	for _, want := range []string{`g.yaml: grants[1].id: "a" is granted already by grants[0]`, "g.yaml: grants[2]: role:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want %q", err, want)
		}
	}
	if _, err := Parse("g.yaml", []byte("grants:\n  - {id: a, role: operator, extra: 1}\n")); err == nil {
		t.Error("an unknown key was accepted")
	}
	gs, err := Parse("g.yaml", []byte("grants:\n  - {id: a, role: operator}\n"))
	if err != nil || len(gs) != 1 {
		t.Fatalf("%v %v", gs, err)
	}
}

func TestTokensAreStoredAsHashesOnly(t *testing.T) {
	token, stored, err := NewToken(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, TokenPrefix) || len(token) != len(TokenPrefix)+43 {
		t.Fatalf("token %q", token)
	}
	g := Grant{ID: "envoy", Role: RoleService, Services: []string{"shop"}, Tokens: []Token{stored}}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := Encode(g)
	if err != nil || bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(token[len(TokenPrefix):])) {
		t.Fatalf("stored form %s holds the token (%v)", b, err)
	}
	s := NewSet([]Grant{g})
	if id, _, err := s.Token(token, time.Now()); err != nil || id.ID != "token:envoy" {
		t.Fatalf("token lookup: %v %v", id, err)
	}
	if id, _, err := s.Token(token+"x", time.Now()); id != nil || !errors.Is(err, ErrTokenUnknown) {
		t.Fatalf("a wrong token matched: %v %v", id, err)
	}
}

// Earlier grants win: a grants file's grant cannot be replaced by a stored
// one, nor its token taken over.
func TestSetEarlierGrantsWin(t *testing.T) {
	_, tok, _ := NewToken(time.Now())
	file := []Grant{{ID: "router", Role: RoleInternal, Tokens: []Token{tok}}}
	stored := []Grant{{ID: "router", Role: RoleService, Services: []string{"x"}}, {ID: "thief", Role: RoleOperator, Tokens: []Token{tok}}}
	s := NewSet(file, stored)
	if id := s.Lookup("router"); id.Role != RoleInternal {
		t.Fatalf("router: %v", id.Role)
	}
	if s.Len() != 2 || len(s.Grants()) != 2 {
		t.Fatalf("%d identities", s.Len())
	}
	h := tok.SHA256
	for _, e := range s.byHash {
		if e.id.ID != "token:router" {
			t.Fatalf("token %s belongs to %s", h, e.id.ID)
		}
	}
}

// Every method of shardlimit's services is in the method table: a method
// added without deciding who may call it would be refused to everyone.
func TestEveryMethodIsInTheTable(t *testing.T) {
	for _, sd := range []grpc.ServiceDesc{shardlimitv1.RateLimiter_ServiceDesc, shardlimitv1.Admin_ServiceDesc, shardlimitv1.Shard_ServiceDesc,
		shardlimitv1.Rebalancer_ServiceDesc, rlsv3.RateLimitService_ServiceDesc, healthpb.Health_ServiceDesc} {
		for _, m := range sd.Methods {
			if _, _, ok := PermissionOf("/" + sd.ServiceName + "/" + m.MethodName); !ok {
				t.Errorf("%s/%s is not in the method table", sd.ServiceName, m.MethodName)
			}
		}
		for _, m := range sd.Streams {
			if _, _, ok := PermissionOf("/" + sd.ServiceName + "/" + m.StreamName); !ok {
				t.Errorf("%s/%s (stream) is not in the method table", sd.ServiceName, m.StreamName)
			}
		}
	}
	for method, want := range map[string]string{
		"/shardlimit.v1.Shard/Decide":                               "internal",
		"/shardlimit.v1.Shard/DecideStream":                         "internal", // a method added later is internal-only too
		"/shardlimit.v1.Admin/ApplyRules":                           "operator",
		"/shardlimit.v1.RateLimiter/Check":                          "service, operator",
		"/shardlimit.v1.Rebalancer/Run":                             "operator, internal",
		"/grpc.health.v1.Health/Check":                              "anyone",
		"/grpc.health.v1.Health/Watch":                              "service, operator, internal", // a stream held open: known callers only
		"/grpc.health.v1.Health/List":                               "service, operator, internal",
		"/shardlimit.v1.Admin/SomethingNew":                         "",
		"/evil.Service/Method":                                      "",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": "service, operator, internal",
	} {
		p, _, ok := PermissionOf(method)
		if got := p.String(); (want == "" && ok) || (want != "" && got != want) {
			t.Errorf("%s: %q (known %v), want %q", method, got, ok, want)
		}
	}
}

// testCert is a parsed certificate naming uris and dnsNames, enough for
// identify (which reads the verified chain's leaf).
func testCert(t *testing.T, uris []string, dnsNames []string) *x509.Certificate {
	t.Helper()
	c := &x509.Certificate{DNSNames: dnsNames}
	for _, u := range uris {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		c.URIs = append(c.URIs, p)
	}
	return c
}

// callCtx is the context of a call from a peer with cert (verified, or
// nil) and the given authorization metadata values.
func callCtx(cert *x509.Certificate, authz ...string) context.Context {
	info := credentials.TLSInfo{State: tls.ConnectionState{}}
	if cert != nil {
		info.State.VerifiedChains = [][]*x509.Certificate{{cert}}
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 5}, AuthInfo: info})
	if len(authz) > 0 {
		md := metadata.MD{}
		for _, a := range authz {
			md.Append("authorization", a)
		}
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	return ctx
}

func TestInterceptorDecides(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	a, err := New(Options{Component: "router", Registry: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	token, stored, _ := NewToken(time.Now())
	a.SetGrants(NewSet([]Grant{
		{ID: "spiffe://x/shop", Role: RoleService, Services: []string{"shop"}},
		{ID: "dns:ops.example", Role: RoleOperator},
		{ID: "spiffe://x/router", Role: RoleInternal},
		{ID: "envoy", Role: RoleService, Services: []string{"bank"}, Tokens: []Token{stored}},
	}), 0)
	shop := testCert(t, []string{"spiffe://x/shop"}, nil)
	ops := testCert(t, nil, []string{"other.example", "ops.example"})
	stranger := testCert(t, []string{"spiffe://x/nobody"}, []string{"nobody.example"})
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		method string
		code   codes.Code
		caller string
	}{
		{"no credentials", callCtx(nil), "/shardlimit.v1.RateLimiter/Check", codes.Unauthenticated, ""},
		{"no credentials, health", callCtx(nil), "/grpc.health.v1.Health/Check", codes.OK, ""},
		{"no credentials, health watch", callCtx(nil), "/grpc.health.v1.Health/Watch", codes.Unauthenticated, ""},
		{"no credentials, health list", callCtx(nil), "/grpc.health.v1.Health/List", codes.Unauthenticated, ""},
		{"service, health watch", callCtx(shop), "/grpc.health.v1.Health/Watch", codes.OK, "uri:spiffe://x/shop"},
		{"unknown certificate", callCtx(stranger), "/shardlimit.v1.RateLimiter/Check", codes.Unauthenticated, ""},
		{"SAN URI", callCtx(shop), "/shardlimit.v1.RateLimiter/Check", codes.OK, "uri:spiffe://x/shop"},
		{"DNS name", callCtx(ops), "/shardlimit.v1.Admin/ApplyRules", codes.OK, "dns:ops.example"},
		{"DNS name of a token grant", callCtx(testCert(t, nil, []string{"envoy"})), "/shardlimit.v1.RateLimiter/Check", codes.Unauthenticated, ""},
		{"DNS name of a URI grant", callCtx(testCert(t, nil, []string{"spiffe://x/router"})), "/shardlimit.v1.Shard/Drop", codes.Unauthenticated, ""},
		{"service on an operator method", callCtx(shop), "/shardlimit.v1.Admin/ApplyRules", codes.PermissionDenied, ""},
		{"operator on the shard API", callCtx(ops), "/shardlimit.v1.Shard/Drop", codes.PermissionDenied, ""},
		{"internal on a new shard method", callCtx(testCert(t, []string{"spiffe://x/router"}, nil)), "/shardlimit.v1.Shard/DecideStream", codes.OK, "uri:spiffe://x/router"},
		{"unknown method", callCtx(ops), "/shardlimit.v1.Admin/Nope", codes.PermissionDenied, ""},
		{"token", callCtx(nil, "Bearer "+token), "/shardlimit.v1.RateLimiter/Check", codes.OK, "token:envoy"},
		{"token wins over the certificate", callCtx(ops, "bearer "+token), "/shardlimit.v1.Admin/ApplyRules", codes.PermissionDenied, ""},
		{"unknown token with a good certificate", callCtx(ops, "Bearer slt_nope"), "/shardlimit.v1.Admin/ApplyRules", codes.Unauthenticated, ""},
		{"not a bearer", callCtx(nil, "Basic abc"), "/shardlimit.v1.RateLimiter/Check", codes.Unauthenticated, ""},
		{"two tokens", callCtx(nil, "Bearer "+token, "Bearer "+token), "/shardlimit.v1.RateLimiter/Check", codes.Unauthenticated, ""},
	} {
		var got *Caller
		_, err := a.Unary(tc.ctx, nil, &grpc.UnaryServerInfo{FullMethod: tc.method}, func(ctx context.Context, _ any) (any, error) {
			got = FromContext(ctx)
			return nil, nil
		})
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
		if tc.code == codes.OK && tc.caller != "" && got.Name() != tc.caller {
			t.Errorf("%s: caller %q, want %q", tc.name, got.Name(), tc.caller)
		}
		if msg := status.Convert(err).Message(); strings.Contains(msg, token) || strings.Contains(msg, "slt_nope") {
			t.Errorf("%s: the message echoes the token: %s", tc.name, msg)
		}
	}
	// Streams decide alike.
	err = a.Stream(nil, &fakeStream{ctx: callCtx(shop)}, &grpc.StreamServerInfo{FullMethod: "/shardlimit.v1.Shard/DecideStream"}, func(any, grpc.ServerStream) error {
		t.Error("a service's stream reached the shard API")
		return nil
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("stream: %v", err)
	}
	var streamCaller string
	if err := a.Stream(nil, &fakeStream{ctx: callCtx(testCert(t, []string{"spiffe://x/router"}, nil))}, &grpc.StreamServerInfo{FullMethod: "/shardlimit.v1.Shard/DecideStream"},
		func(_ any, ss grpc.ServerStream) error { streamCaller = FromContext(ss.Context()).Name(); return nil }); err != nil || streamCaller != "uri:spiffe://x/router" {
		t.Errorf("internal stream: %v, caller %q", err, streamCaller)
	}
	if logs.Len() == 0 || strings.Contains(logs.String(), token) || strings.Contains(logs.String(), "slt_nope") {
		t.Errorf("logs hold a token, or nothing:\n%s", logs.String())
	}
	if mfs, _ := reg.Gather(); len(mfs) == 0 {
		t.Error("no metric registered")
	}
	if v := value(t, reg, "shardlimit_router_auth_refusals_total", "api", "unknown", "reason", ReasonMethod); v != 1 {
		t.Errorf("refusals of an unknown method under api=unknown: %v", v)
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f *fakeStream) Context() context.Context { return f.ctx }

// MayUse: a service for its services, an operator for all, nobody without
// a Caller; each refusal counted with reason service.
func TestMayUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, _ := New(Options{Component: "router", Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	s := NewSet([]Grant{{ID: "shop", Role: RoleService, Services: []string{"shop"}}, {ID: "op", Role: RoleOperator}, {ID: "r", Role: RoleInternal}})
	caller := func(id string) *Caller {
		return &Caller{Identity: s.Lookup(id), a: a, api: "shardlimit.v1.RateLimiter", known: true}
	}
	for _, tc := range []struct {
		c       *Caller
		service string
		code    codes.Code
	}{
		{caller("shop"), "shop", codes.OK},
		{caller("shop"), "bank", codes.PermissionDenied},
		{caller("op"), "bank", codes.OK},
		{caller("r"), "shop", codes.PermissionDenied},
		{nil, "shop", codes.Unauthenticated},
		{&Caller{a: a}, "shop", codes.Unauthenticated},
	} {
		err := tc.c.MayUse(tc.service)
		if status.Code(err) != tc.code || strings.Contains(status.Convert(err).Message(), tc.service) && tc.code != codes.OK {
			t.Errorf("%v for %s: %v, want %v naming no service", tc.c.Name(), tc.service, err, tc.code)
		}
	}
	if v := value(t, reg, "shardlimit_router_auth_refusals_total", "api", "shardlimit.v1.RateLimiter", "reason", ReasonService); v != 2 {
		t.Errorf("service refusals: %v, want 2", v)
	}
}

// Refusals are logged at most once per reason per LogEvery, with the
// count of lines left out.
func TestRefusalLogsAreRateLimited(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	a, _ := New(Options{Component: "shard", Registry: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil)), LogEvery: 10 * time.Second})
	now := time.Unix(1000, 0)
	a.refusals.now = func() time.Time { return now }
	c := &Caller{a: a, api: "shardlimit.v1.Shard", method: "/shardlimit.v1.Shard/Drop", known: true}
	for range 5 {
		a.refusals.record(c, ReasonNoCredentials)
	}
	a.refusals.record(c, ReasonRole)
	now = now.Add(11 * time.Second)
	a.refusals.record(c, ReasonNoCredentials)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "suppressed=4") || !strings.Contains(lines[1], "reason=role") {
		t.Fatalf("log lines:\n%s", logs.String())
	}
	if v := value(t, reg, "shardlimit_shard_auth_refusals_total", "api", "shardlimit.v1.Shard", "reason", ReasonNoCredentials); v != 6 {
		t.Errorf("counted %v, want 6", v)
	}
}

// Connections closed for not authenticating in time (package rpc counts
// them) are logged in the same window, apart from refused calls.
func TestAuthTimeoutLogsAreRateLimited(t *testing.T) {
	var logs bytes.Buffer
	a, _ := New(Options{Component: "shard", Logger: slog.New(slog.NewTextHandler(&logs, nil)), LogEvery: 10 * time.Second})
	now := time.Unix(1000, 0)
	a.refusals.now = func() time.Time { return now }
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4000}})
	for range 3 {
		a.ConnAuthTimedOut(ctx)
	}
	a.refusals.record(&Caller{a: a, api: "shardlimit.v1.Shard", method: "/shardlimit.v1.Shard/Drop", known: true}, ReasonNoCredentials)
	now = now.Add(11 * time.Second)
	a.ConnAuthTimedOut(ctx)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "reason=auth_timeout peer=192.0.2.1:4000") ||
		!strings.Contains(lines[1], "reason=no_credentials") || !strings.Contains(lines[2], "suppressed=2") {
		t.Fatalf("log lines:\n%s", logs.String())
	}
}

func TestInsecureAllowsEverythingAndSaysSo(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	a, err := New(Options{Component: "router", Registry: reg, Insecure: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Unary(callCtx(nil), nil, &grpc.UnaryServerInfo{FullMethod: "/shardlimit.v1.Shard/Drop"}, func(ctx context.Context, _ any) (any, error) {
		return nil, FromContext(ctx).MayUse("bank")
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "INSECURE") || value(t, reg, "shardlimit_router_insecure") != 1 {
		t.Fatalf("no warning or metric: %s", logs.String())
	}
}

// value returns the value of the series of reg named name whose labels
// are exactly the given name, value pairs; 0 when there is none.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	m := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[labels[i]] = labels[i+1]
	}
	return metrictest.Value(t, reg, name, m)
}

// Ids name their kind; an id written before kinds is a URI grant if it
// parses as an absolute URI, else a token grant; a DNS grant says dns:.
func TestIDKinds(t *testing.T) {
	for _, tc := range []struct {
		id, canonical string
		explicit      bool
		err           string
	}{
		{"uri:spiffe://shardlimit/operator", "uri:spiffe://shardlimit/operator", true, ""},
		{"dns:Envoy.Example.COM", "dns:envoy.example.com", true, ""},
		{"token:shop", "token:shop", true, ""},
		{"spiffe://shardlimit/router", "uri:spiffe://shardlimit/router", false, ""},
		{"urn:x:y", "uri:urn:x:y", false, ""},
		{"shop", "token:shop", false, ""},
		{"envoy.example.com", "token:envoy.example.com", false, ""},
		{"uri:shop", "", true, `uri: "shop" is not an absolute URI`},
		{"dns:a/b", "", true, `dns: "a/b" is not a DNS name`},
		{"token:", "", true, "token: a name is required"},
	} {
		err := CheckID(tc.id)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.id, err, tc.err)
			}
			continue
		}
		_, _, explicit := ParseID(tc.id)
		if err != nil || CanonicalID(tc.id) != tc.canonical || explicit != tc.explicit {
			t.Errorf("%s: %v, canonical %q explicit %v, want %q %v", tc.id, err, CanonicalID(tc.id), explicit, tc.canonical, tc.explicit)
		}
		if err := CheckExplicitID(tc.id); (err == nil) != tc.explicit || (err != nil && !strings.Contains(err.Error(), "id: the id must name its kind")) {
			t.Errorf("CheckExplicitID(%s): %v", tc.id, err)
		}
	}
	if _, _, err := NewTokenTTL(time.Now(), time.Second); err == nil || !strings.Contains(err.Error(), "ttl: 1s is outside [1m0s, 87600h0m0s]") {
		t.Errorf("a 1s ttl: %v", err)
	}
}
