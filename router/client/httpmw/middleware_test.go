package httpmw

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/creds"
)

const testRules = `
rules:
  - service: shop
    endpoint: /checkout
    name: checkout-per-user
    limit: 10
    period: 1m
  - service: shop
    endpoint: /by-key
    name: per-key
    key: [api_key]
    limit: 3
    period: 1m
  - service: shop
    endpoint: /by-ip
    name: per-ip
    key: [ip]
    limit: 3
    period: 1m
  - service: shop
    endpoint: /heavy
    name: heavy
    limit: 10
    period: 1h
`

// testServer is an HTTP server behind the middleware; handled counts the
// requests that reached the handler.
type testServer struct {
	*httptest.Server
	handled atomic.Int64
}

func newTestServer(t *testing.T, c *client.Client, o Options) *testServer {
	t.Helper()
	s := &testServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handled.Add(1)
		fmt.Fprintln(w, "ok")
	})
	s.Server = httptest.NewServer(New(c, o)(h))
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) get(t *testing.T, path string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

func startCluster(t *testing.T) *client.Client {
	t.Helper()
	rs, err := rules.Parse("test.yaml", []byte(testRules))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: rs})
	cl, err := client.New(client.Options{TLS: c.TLS(creds.OperatorID), Routers: []string{c.Routers[0].Addr()}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Ten requests of a user pass with the RateLimit fields counting down,
// the policy complete without configuration and t the wait for the next
// token (at most 6 s at 10 a minute), not for a full bucket; the eleventh
// gets 429 with Retry-After, the fields and quota-exceeded problem
// details, and never reaches the handler; another user still passes.
func TestUserHeaderLimit(t *testing.T) {
	cl := startCluster(t)
	s := newTestServer(t, cl, Options{Service: "shop"})
	for i := range 10 {
		resp := s.get(t, "/checkout", "X-User-ID", "alice")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"checkout-per-user";q=10;w=60` {
			t.Fatalf("request %d: RateLimit-Policy %q", i, got)
		}
		got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"checkout-per-user";r=%d;t=`, 9-i)
		if !strings.HasPrefix(got, want) {
			t.Fatalf("request %d: RateLimit %q, want prefix %q", i, got, want)
		}
		if tt, err := strconv.Atoi(strings.TrimPrefix(got, want)); err != nil || tt < 1 || tt > 6 {
			t.Fatalf("request %d: RateLimit %q: t not in 1..6 (the next token, not the full bucket)", i, got)
		}
		if resp.Header.Get("Retry-After") != "" {
			t.Fatalf("request %d: Retry-After on an allowed request", i)
		}
	}
	resp := s.get(t, "/checkout", "X-User-ID", "alice")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request 11: %s, want 429", resp.Status)
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 6 {
		t.Fatalf("Retry-After %q, want 1..6 seconds (one token per 6s)", resp.Header.Get("Retry-After"))
	}
	if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"checkout-per-user";r=0;t=%d`, ra); got != want {
		t.Fatalf("RateLimit %q, want %q", got, want)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"checkout-per-user";q=10;w=60` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	var problem map[string]any
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("429 Content-Type %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&problem); err != nil {
		t.Fatal(err)
	}
	if problem["type"] != "https://iana.org/assignments/http-problem-types#quota-exceeded" || problem["status"] != float64(429) ||
		fmt.Sprint(problem["violated-policies"]) != "[checkout-per-user]" {
		t.Fatalf("problem %v", problem)
	}
	if n := s.handled.Load(); n != 10 {
		t.Fatalf("handler reached %d times, want 10", n)
	}
	if resp := s.get(t, "/checkout", "X-User-ID", "bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob: %s", resp.Status)
	}

	// No header: 400 by default, naming the header; pass through when
	// configured.
	if resp := s.get(t, "/checkout"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no header: %s, want 400", resp.Status)
	}
	allow := newTestServer(t, cl, Options{Service: "shop", MissingKey: MissingKeyAllow, OmitHeadersWhenAllowed: true})
	if resp := allow.get(t, "/checkout"); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("no header, MissingKeyAllow: %s %v", resp.Status, resp.Header)
	}
	if resp := allow.get(t, "/checkout", "X-User-ID", "carol"); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != "" {
		t.Fatalf("OmitHeadersWhenAllowed: %s %v", resp.Status, resp.Header)
	}
	// A key the router rejects (over its 256-byte bound) is a 400.
	if resp := s.get(t, "/checkout", "X-User-ID", strings.Repeat("u", 300)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("long key: %s, want 400", resp.Status)
	}
}

func TestMissingHeaderMessageNamesTheHeader(t *testing.T) {
	cl, err := client.New(client.Options{TLS: deadTLS, Routers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	h := New(cl, Options{Service: "shop", Key: KeyAPIKeyHeader})(http.NotFoundHandler())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "X-API-Key") {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
}

// API keys name their own counters.
func TestAPIKeyHeaderLimit(t *testing.T) {
	cl := startCluster(t)
	s := newTestServer(t, cl, Options{Service: "shop", Key: KeyAPIKeyHeader})
	for i := range 3 {
		if resp := s.get(t, "/by-key", "X-API-Key", "k-1"); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
	}
	resp := s.get(t, "/by-key", "X-API-Key", "k-1")
	if resp.StatusCode != http.StatusTooManyRequests || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"per-key";r=0;t=`) {
		t.Fatalf("request 4: %s %v", resp.Status, resp.Header)
	}
	if resp := s.get(t, "/by-key", "X-API-Key", "k-2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another key: %s", resp.Status)
	}
}

// The client IP keys the counter; X-Forwarded-For counts only from a
// trusted proxy, so a client that rotates a spoofed header is still one
// client.
func TestClientIPLimitWithTrustedProxies(t *testing.T) {
	cl := startCluster(t)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	behindProxy := newTestServer(t, cl, Options{Service: "shop", Key: KeyClientIP, TrustedProxies: loopback})
	for i := range 3 {
		if resp := behindProxy.get(t, "/by-ip", "X-Forwarded-For", "1.1.1.1, 198.51.100.1"); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
	}
	// A forged left-most hop does not make a new client.
	if resp := behindProxy.get(t, "/by-ip", "X-Forwarded-For", "2.2.2.2, 198.51.100.1"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request 4 with another forged hop: %s, want 429", resp.Status)
	}
	if resp := behindProxy.get(t, "/by-ip", "X-Forwarded-For", "198.51.100.2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another client: %s", resp.Status)
	}

	direct := newTestServer(t, cl, Options{Service: "shop", Key: KeyClientIP})
	for i := range 3 {
		if resp := direct.get(t, "/by-ip", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i)); resp.StatusCode != http.StatusOK {
			t.Fatalf("direct request %d: %s", i, resp.Status)
		}
	}
	if resp := direct.get(t, "/by-ip", "X-Forwarded-For", "203.0.113.99"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("spoofed X-Forwarded-For from an untrusted peer made a new client: %s", resp.Status)
	}
}

// Hits and Endpoint are the caller's to choose.
func TestHitsAndEndpoint(t *testing.T) {
	cl := startCluster(t)
	s := newTestServer(t, cl, Options{
		Service:  "shop",
		Endpoint: func(*http.Request) string { return "/heavy" },
		Hits:     func(r *http.Request) int64 { return int64(len(r.URL.Query().Get("n"))) },
	})
	if resp := s.get(t, "/anything?n=xxxx", "X-User-ID", "dora"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"heavy";r=6;`) {
		t.Fatalf("4 hits: %s %v", resp.Status, resp.Header)
	}
	if resp := s.get(t, "/anything?n=xxxxxxx", "X-User-ID", "dora"); resp.StatusCode != http.StatusTooManyRequests || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"heavy";r=6;`) {
		t.Fatalf("7 hits over 6 remaining: %s %v", resp.Status, resp.Header)
	}
}

// With no router reachable the middleware follows the client's failure
// mode: through when open, 429 with Retry-After (and no RateLimit fields,
// as no counter decided) when closed.
func TestFailureModes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	_ = lis.Close()
	for _, mode := range []client.FailureMode{client.FailOpen, client.FailClosed} {
		cl, err := client.New(client.Options{TLS: deadTLS, Routers: []string{dead}, Timeout: 100 * time.Millisecond, FailureMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cl.Close() })
		s := newTestServer(t, cl, Options{Service: "shop"})
		resp := s.get(t, "/checkout", "X-User-ID", "alice")
		if resp.Header.Get("RateLimit") != "" || resp.Header.Get("RateLimit-Policy") != "" {
			t.Fatalf("%v: RateLimit fields without a counter: %v", mode, resp.Header)
		}
		switch mode {
		case client.FailOpen:
			if resp.StatusCode != http.StatusOK || s.handled.Load() != 1 {
				t.Fatalf("open: %s", resp.Status)
			}
		case client.FailClosed:
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || s.handled.Load() != 0 {
				t.Fatalf("closed: %s %v", resp.Status, resp.Header)
			}
		}
	}

	// An error that is not about the request (here: a closed client)
	// follows the failure mode too.
	for _, mode := range []client.FailureMode{client.FailOpen, client.FailClosed} {
		cl, err := client.New(client.Options{TLS: deadTLS, Routers: []string{dead}, FailureMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		_ = cl.Close()
		s := newTestServer(t, cl, Options{Service: "shop"})
		resp := s.get(t, "/checkout", "X-User-ID", "alice")
		want := map[client.FailureMode]int{client.FailOpen: http.StatusOK, client.FailClosed: http.StatusServiceUnavailable}[mode]
		if resp.StatusCode != want {
			t.Fatalf("%v, closed client: %s, want %d", mode, resp.Status, want)
		}
	}
}

// Options.Denied replaces the answer to a denial; Retry-After is set
// before it runs.
func TestCustomDenied(t *testing.T) {
	cl, err := client.New(client.Options{TLS: deadTLS, Routers: []string{"127.0.0.1:1"}, Timeout: 100 * time.Millisecond, FailureMode: client.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	var seen client.Decision
	s := newTestServer(t, cl, Options{Service: "shop", Denied: func(w http.ResponseWriter, r *http.Request, d client.Decision) {
		seen = d
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":"slow down","path":%q}`, r.URL.Path)
	}})
	resp := s.get(t, "/checkout", "X-User-ID", "alice")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != `{"error":"slow down","path":"/checkout"}` ||
		resp.Header.Get("Retry-After") != "1" || !seen.FromFailureMode || s.handled.Load() != 0 {
		t.Fatalf("%s %v %s; decision %+v", resp.Status, resp.Header, body, seen)
	}
}

func TestNewPanicsNamingTheField(t *testing.T) {
	cl, err := client.New(client.Options{TLS: deadTLS, Routers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for want, o := range map[string]Options{
		"service: required":  {},
		"key: KeySource(9)":  {Service: "s", Key: 9},
		"missing key: 4":     {Service: "s", MissingKey: 4},
		"forwarded header":   {Service: "s", ForwardedHeader: "X Bad"},
		"trusted proxies[0]": {Service: "s", TrustedProxies: []netip.Prefix{{}}},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want) {
					t.Errorf("panic %v, want one containing %q", r, want)
				}
			}()
			New(cl, o)
		}()
	}
}

// deadTLS is the TLS config of clients of addresses where nothing listens:
// no handshake ever happens.
var deadTLS = &tls.Config{MinVersion: tls.VersionTLS12}
