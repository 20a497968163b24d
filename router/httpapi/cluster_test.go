package httpapi_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/httpapi"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/auth"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
)

const clusterRules = `
rules:
  - service: shop
    endpoint: /buy
    name: buy
    algorithm: token_bucket
    limit: 2
    period: 1m
  - service: other
    endpoint: "*"
    name: other
    algorithm: token_bucket
    limit: 100
    period: 1m
  - service: edge
    name: checkout
    descriptor: [{key: path, value: /checkout}]
    limit: 1
    period: 1m
`

// The identities of the test: a service granted shop and edge, by
// certificate or by token, and one granted other only.
const (
	shopID  = "spiffe://test/shop"
	otherID = "spiffe://test/other"
)

// api is an HTTP client of the router's HTTP/JSON API.
type api struct {
	t      *testing.T
	base   string
	client *http.Client
	token  string
}

// answer is an HTTP answer: its status, headers and JSON body.
type answer struct {
	code   int
	proto  int // HTTP major version
	header http.Header
	body   map[string]any
	raw    string
}

func (a api) post(path, body string) answer {
	a.t.Helper()
	return a.do(http.MethodPost, path, body)
}

func (a api) do(method, path, body string) answer {
	a.t.Helper()
	return a.send(method, path, strings.NewReader(body))
}

// send sends body as it is: a reader other than a strings.Reader goes
// without a Content-Length, chunked.
func (a api) send(method, path string, body io.Reader) answer {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard, above the routers' 5 s deadline
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	ans := answer{code: resp.StatusCode, proto: resp.ProtoMajor, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &ans.body); err != nil {
		a.t.Fatalf("POST %s: %d with a body that is not JSON: %q", path, resp.StatusCode, raw)
	}
	return ans
}

// decision returns the i-th decision of a CheckResponse answer.
func (ans answer) decision(t *testing.T, i int) map[string]any {
	t.Helper()
	ds, _ := ans.body["decisions"].([]any)
	if len(ds) <= i {
		t.Fatalf("answer %d has no decision %d: %s", ans.code, i, ans.raw)
	}
	return ds[i].(map[string]any)
}

// want fails unless the answer has status code and, for an error, is
// RFC 9457 problem details whose detail contains every part.
func (ans answer) want(t *testing.T, code int, parts ...string) {
	t.Helper()
	if ans.code != code {
		t.Fatalf("status %d, want %d: %s", ans.code, code, ans.raw)
	}
	if code < 400 || ans.body["decisions"] != nil || ans.body["overallCode"] != nil {
		return // an answer, 429 included
	}
	if ct := ans.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("an error with Content-Type %q, want application/problem+json: %s", ct, ans.raw)
	}
	typ, _ := ans.body["type"].(string)
	title, _ := ans.body["title"].(string)
	if !strings.HasPrefix(typ, httpapi.ProblemBase) || title == "" || ans.body["status"] != float64(code) {
		t.Fatalf("problem details without a type under %s, a title or status %d: %s", httpapi.ProblemBase, code, ans.raw)
	}
	detail, _ := ans.body["detail"].(string)
	for _, p := range parts {
		if !strings.Contains(detail, p) {
			t.Fatalf("detail %q does not name %q", detail, p)
		}
	}
}

// problemType is the kind of an error answer: its type after
// httpapi.ProblemBase.
func (ans answer) problemType() string {
	typ, _ := ans.body["type"].(string)
	return strings.TrimPrefix(typ, httpapi.ProblemBase)
}

func check(service, endpoint, user string) string {
	return fmt.Sprintf(`{"checks":[{"service":%q,"endpoint":%q,"user":%q}]}`, service, endpoint, user)
}

// httpClient is a client with TLS config cfg that speaks HTTP/2 when h2,
// else offers only HTTP/1.1 in ALPN, as curl --http1.1 and many HTTP/1.1
// clients do (the router's gRPC config offers h2 only).
func httpClient(cfg *tls.Config, h2 bool) *http.Client {
	if cfg != nil && !h2 {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2}}
}

func start(t *testing.T, o clustertest.Options) *clustertest.Cluster {
	t.Helper()
	rs, err := rules.Parse("http.yaml", []byte(clusterRules))
	if err != nil {
		t.Fatal(err)
	}
	o.Rules, o.Shards = rs, 2
	o.Router = func(ro *router.Options) {
		ro.HTTPListen = "127.0.0.1:0"
		ro.HTTPMaxBody = 4 << 10
	}
	return clustertest.New(t, etcdEndpoint, o)
}

// The HTTP/JSON API over real HTTPS against a real cluster: the same
// decisions, credentials, validation and metrics as gRPC.
func TestHTTPAPI(t *testing.T) {
	c := start(t, clustertest.Options{Grants: []auth.Grant{
		{ID: shopID, Role: auth.RoleService, Services: []string{"shop", "edge"}},
		{ID: otherID, Role: auth.RoleService, Services: []string{"other"}},
	}})
	r := c.Routers[0]
	base := "https://" + r.HTTPAddr()
	shop := api{t: t, base: base, client: httpClient(c.TLS(shopID), false)}          // HTTP/1.1, client certificate
	shopH2 := api{t: t, base: base, client: httpClient(c.TLS(shopID), true)}         // HTTP/2
	anonTLS := httpClient(mustClientTLS(t, creds.Files{CA: c.PKI.Router.CA}), false) // verifies the server, presents nothing
	token := api{t: t, base: base, client: anonTLS, token: c.Token(shopID)}
	anonymous := api{t: t, base: base, client: anonTLS}
	other := api{t: t, base: base, client: httpClient(c.TLS(otherID), false)}
	// The token is stored after the router started: wait until it holds it.
	poll.Until(t, 10*time.Second, func() error {
		if ans := token.post("/v1/check", `{"checks":[{"service":"shop","endpoint":"/none","user":"u","hits":"0"}]}`); ans.code != http.StatusOK {
			return fmt.Errorf("the token is not known yet: %d %s", ans.code, ans.raw)
		}
		return nil
	})

	t.Run("allowed, then denied with 200 by default, with RateLimit fields", func(t *testing.T) {
		for i := range 2 {
			ans := shop.post("/v1/check", check("shop", "/buy", "alice"))
			ans.want(t, http.StatusOK)
			d := ans.decision(t, 0)
			if d["allowed"] != true || d["limit"] != "2" || d["remaining"] != strconv.Itoa(1-i) || d["rule"] != "buy" {
				t.Fatalf("check %d: %s", i, ans.raw)
			}
			// Token bucket 2/min: one more hit every 30 s.
			if p, l := ans.header.Get("RateLimit-Policy"), ans.header.Get("RateLimit"); p != `"buy";q=2;w=60` || !strings.HasPrefix(l, `"buy";r=`+strconv.Itoa(1-i)+";t=") {
				t.Fatalf("check %d: RateLimit-Policy %q, RateLimit %q", i, p, l)
			}
			if ra := ans.header.Get("Retry-After"); ra != "" {
				t.Fatalf("check %d: Retry-After %q while allowed", i, ra)
			}
		}
		ans := shop.post("/v1/check", check("shop", "/buy", "alice"))
		ans.want(t, http.StatusOK)
		if d := ans.decision(t, 0); d["allowed"] != false || d["remaining"] != "0" || d["retryAfter"] == nil {
			t.Fatalf("over the limit: %s", ans.raw)
		}
		// Denied: Retry-After, and t is the same wait (it never points earlier).
		ra, err := strconv.Atoi(ans.header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 60 {
			t.Fatalf("denied: Retry-After %q, want 1..60", ans.header.Get("Retry-After"))
		}
		if p, l := ans.header.Get("RateLimit-Policy"), ans.header.Get("RateLimit"); p != `"buy";q=2;w=60` || l != `"buy";r=0;t=`+strconv.Itoa(ra) {
			t.Fatalf("denied: RateLimit-Policy %q, RateLimit %q, want t=%d", p, l, ra)
		}
		// A batch of several checks gets no fields: they would mix users.
		ans = shop.post("/v1/check", `{"checks":[{"service":"shop","endpoint":"/buy","user":"alice"},{"service":"shop","endpoint":"/buy","user":"zed"}]}`)
		ans.want(t, http.StatusOK)
		for _, f := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
			if v := ans.header.Get(f); v != "" {
				t.Fatalf("a batch of 2 with %s %q", f, v)
			}
		}
		// A check no rule applies to gets none either.
		ans = shop.post("/v1/check", check("shop", "/none", "alice"))
		if ans.header.Get("RateLimit-Policy") != "" || ans.header.Get("RateLimit") != "" {
			t.Fatalf("no rule, yet fields: %v", ans.header)
		}
	})

	t.Run("429 with Retry-After when asked", func(t *testing.T) {
		ans := shopH2.post("/v1/check?deny_status=429", check("shop", "/buy", "alice"))
		ans.want(t, http.StatusTooManyRequests)
		if ans.proto != 2 {
			t.Fatalf("HTTP/%d, want HTTP/2", ans.proto)
		}
		if d := ans.decision(t, 0); d["allowed"] != false {
			t.Fatalf("429 without a denial: %s", ans.raw)
		}
		if s, err := strconv.Atoi(ans.header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
			t.Fatalf("Retry-After %q, want 1..60", ans.header.Get("Retry-After"))
		}
		// Asked, but allowed: 200.
		shopH2.post("/v1/check?deny_status=429", check("shop", "/buy", "bob")).want(t, http.StatusOK)
		// A batch with one check denied is a 429, each check answered.
		ans = shop.post("/v1/check?deny_status=429", `{"checks":[{"service":"shop","endpoint":"/buy","user":"carol"},{"service":"shop","endpoint":"/buy","user":"alice"}]}`)
		ans.want(t, http.StatusTooManyRequests)
		if ans.decision(t, 0)["allowed"] != true || ans.decision(t, 1)["allowed"] != false {
			t.Fatalf("batch: %s", ans.raw)
		}
	})

	t.Run("a bearer token without a certificate", func(t *testing.T) {
		ans := token.post("/v1/check", check("shop", "/buy", "dave"))
		ans.want(t, http.StatusOK)
		if ans.decision(t, 0)["allowed"] != true {
			t.Fatalf("%s", ans.raw)
		}
	})

	t.Run("errors are problem details, one type per kind", func(t *testing.T) {
		for _, tc := range []struct {
			ans  answer
			kind string
		}{
			{shop.post("/v1/check", `{"checks":[]}`), "invalid-argument"},
			{shop.post("/v1/check", `{"checks":[{"service":"shop","user":"`+strings.Repeat("x", 5000)+`"}]}`), "body-too-large"},
			{anonymous.post("/v1/check", check("shop", "/buy", "u")), "unauthenticated"},
			{other.post("/v1/check", check("shop", "/buy", "u")), "permission-denied"},
			{api{t: t, base: base, client: httpClient(c.TLS(creds.OperatorID), false)}.post("/v1/check", check("nobody", "/x", "u")), "unknown-service"},
			{shop.post("/v2/check", check("shop", "/buy", "u")), "not-found"},
			{shop.do(http.MethodGet, "/json", ""), "method-not-allowed"},
		} {
			if got := tc.ans.problemType(); got != tc.kind {
				t.Errorf("type %q, want %q: %d %s", got, tc.kind, tc.ans.code, tc.ans.raw)
			}
			tc.ans.want(t, tc.ans.code)
		}
	})

	t.Run("bad input is 400 naming the field", func(t *testing.T) {
		shop.post("/v1/check", `{"checks":[{"service":"shop","endpoint":"/buy","user":"erin","hits":"-1"}]}`).want(t, http.StatusBadRequest, "checks[0].hits", "0..")
		shop.post("/v1/check", `{"checks":[]}`).want(t, http.StatusBadRequest, "checks", "at least 1")
		shop.post("/v1/check", `{"checks":[{"service":"shop","usr":"erin"}]}`).want(t, http.StatusBadRequest, "usr")
		shop.post("/v1/check", `{"checks":`).want(t, http.StatusBadRequest)
		shop.post("/v1/check", "{\"checks\":[{\"service\":\"shop\",\"user\":\"\xff\"}]}").want(t, http.StatusBadRequest, "UTF-8")
		shop.post("/v1/check?deny_status=418", check("shop", "/buy", "erin")).want(t, http.StatusBadRequest, "deny_status", "429")
		shop.post("/v1/check?deny_stauts=429", check("shop", "/buy", "erin")).want(t, http.StatusBadRequest, "deny_stauts")
		shop.post("/v1/check", `{"checks":[{"service":"shop","user":"`+strings.Repeat("x", 5000)+`"}]}`).want(t, http.StatusRequestEntityTooLarge, "4096 bytes", "--http-max-body")
	})

	t.Run("no credentials is 401", func(t *testing.T) {
		ans := anonymous.post("/v1/check", check("shop", "/buy", "frank"))
		ans.want(t, http.StatusUnauthorized, "no credentials")
		if h := ans.header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer ") {
			t.Fatalf("a 401 with WWW-Authenticate %q, want a Bearer challenge", h)
		}
		bad := api{t: t, base: base, client: anonTLS, token: "not-a-token"}
		bad.post("/v1/check", check("shop", "/buy", "frank")).want(t, http.StatusUnauthorized, "not recognised")
	})

	t.Run("another service is 403, and nothing is counted", func(t *testing.T) {
		other.post("/v1/check", check("shop", "/buy", "gina")).want(t, http.StatusForbidden)
		if d := shop.post("/v1/check", check("shop", "/buy", "gina")).decision(t, 0); d["remaining"] != "1" {
			t.Fatalf("after a refused check, the first one left %v of 2, want 1", d["remaining"])
		}
		other.post("/v1/check", check("other", "/x", "alice")).want(t, http.StatusOK)
		other.post("/json", `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/checkout"}]}]}`).want(t, http.StatusForbidden)
	})

	t.Run("a service with no rules is 404", func(t *testing.T) {
		op := api{t: t, base: base, client: httpClient(c.TLS(creds.OperatorID), false)}
		op.post("/v1/check", check("nobody", "/x", "u")).want(t, http.StatusNotFound)
	})

	t.Run("envoy ratelimit's /json: 200, then 429 OVER_LIMIT", func(t *testing.T) {
		const req = `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/checkout"}]}],"hits_addend":1}`
		ans := shop.post("/json", req)
		ans.want(t, http.StatusOK)
		if ans.body["overallCode"] != "OK" {
			t.Fatalf("%s", ans.raw)
		}
		ans = shop.post("/json", req)
		ans.want(t, http.StatusTooManyRequests)
		sts, _ := ans.body["statuses"].([]any)
		if ans.body["overallCode"] != "OVER_LIMIT" || len(sts) != 1 || sts[0].(map[string]any)["code"] != "OVER_LIMIT" {
			t.Fatalf("%s", ans.raw)
		}
		// The token works on /json too, and a descriptor no rule matches is OK.
		token.post("/json", `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/other"}]}]}`).want(t, http.StatusOK)
		shop.post("/json", `{"domain":"","descriptors":[]}`).want(t, http.StatusBadRequest, "domain")
	})

	t.Run("unknown paths and methods", func(t *testing.T) {
		shop.post("/v2/check", check("shop", "/buy", "x")).want(t, http.StatusNotFound)
		ans := shop.do(http.MethodGet, "/v1/check", "")
		ans.want(t, http.StatusMethodNotAllowed, "only POST")
		if ans.header.Get("Allow") != http.MethodPost {
			t.Fatalf("405 with Allow %q", ans.header.Get("Allow"))
		}
	})

	t.Run("a chunked body over the bound is 413", func(t *testing.T) {
		// No Content-Length: the bound stops the body while it is read.
		body := io.MultiReader(strings.NewReader(`{"checks":[{"service":"`), strings.NewReader(strings.Repeat("x", 8<<10)), strings.NewReader(`"}]}`))
		shop.send(http.MethodPost, "/v1/check", body).want(t, http.StatusRequestEntityTooLarge, "4096 bytes")
	})

	t.Run("metrics: requests, refusals and decisions as on gRPC", func(t *testing.T) {
		reg := r.Registry()
		for _, m := range []struct {
			name   string
			labels map[string]string
			min    float64
		}{
			{"shardlimit_router_http_requests_total", map[string]string{"api": "check", "code": "200"}, 5},
			{"shardlimit_router_http_requests_total", map[string]string{"api": "check", "code": "429"}, 2},
			{"shardlimit_router_http_requests_total", map[string]string{"api": "check", "code": "401"}, 2},
			{"shardlimit_router_http_requests_total", map[string]string{"api": "envoy_json", "code": "429"}, 1},
			{"shardlimit_router_http_requests_total", map[string]string{"api": "other", "code": "404"}, 1},
			{"shardlimit_router_auth_refusals_total", map[string]string{"api": "shardlimit.v1.RateLimiter", "reason": "no_credentials"}, 1},
			{"shardlimit_router_auth_refusals_total", map[string]string{"api": "shardlimit.v1.RateLimiter", "reason": "service"}, 1},
			{"shardlimit_router_decisions_total", map[string]string{"service": "shop", "endpoint": "/buy", "rule": "buy", "algorithm": "token_bucket", "result": "denied"}, 1},
		} {
			if got := clustertest.Metric(t, reg, m.name, m.labels); got < m.min {
				t.Errorf("%s%v = %v, want at least %v", m.name, m.labels, got, m.min)
			}
		}
	})
}

// An insecure router serves plain HTTP, with no credentials needed.
func TestHTTPAPIInsecure(t *testing.T) {
	c := start(t, clustertest.Options{Insecure: true})
	a := api{t: t, base: "http://" + c.Routers[0].HTTPAddr(), client: http.DefaultClient}
	ans := a.post("/v1/check", check("shop", "/buy", "alice"))
	ans.want(t, http.StatusOK)
	if ans.decision(t, 0)["allowed"] != true {
		t.Fatalf("%s", ans.raw)
	}
}

func mustClientTLS(t *testing.T, f creds.Files) *tls.Config {
	t.Helper()
	cfg, err := creds.ClientTLS(f, creds.LocalServerName)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The HTTP API has a connection bound of its own (--http-max-connections),
// apart from gRPC's --max-connections: with the gRPC port's places all
// held, HTTP is still served; past the HTTP bound an HTTP connection is
// closed on accept and counted in the HTTP API's metric, not gRPC's, and
// served again once one is free.
func TestHTTPAPIHasItsOwnConnectionBound(t *testing.T) {
	const grpcBound, httpBound = 2, 1
	rs, err := rules.Parse("http.yaml", []byte(clusterRules))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Rules: rs, Shards: 1, Router: func(ro *router.Options) {
		ro.HTTPListen = "127.0.0.1:0"
		ro.Limits.MaxConnections, ro.Limits.MaxConnectionsPerPeer = grpcBound, grpcBound
		ro.Limits.HandshakeTimeout = time.Minute // the held connections stay for the whole test
		ro.Limits.AuthTimeout = time.Minute
		ro.HTTPMaxConnections = httpBound
	}})
	r := c.Routers[0]
	hold := func(addr string) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	for range grpcBound {
		hold(r.Addr())
	}
	gauge := func(name string, want float64) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() error {
			if got := clustertest.Metric(t, r.Registry(), name, nil); got != want {
				return fmt.Errorf("%s = %v, want %v", name, got, want)
			}
			return nil
		})
	}
	gauge("shardlimit_router_connections", grpcBound)
	op := httpClient(c.TLS(creds.OperatorID), false)
	req := func() error {
		resp, err := op.Post("https://"+r.HTTPAddr()+"/v1/check", "application/json", strings.NewReader(check("shop", "/buy", "u")))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := req(); err != nil {
		t.Fatalf("an HTTP request while gRPC's places are all held: %v", err)
	}
	op.CloseIdleConnections()
	gauge("shardlimit_router_http_connections", 0)
	held := hold(r.HTTPAddr())
	gauge("shardlimit_router_http_connections", httpBound)
	if err := req(); err == nil {
		t.Fatal("an HTTP request was served past --http-max-connections")
	}
	global := map[string]string{"reason": "global"}
	if got := clustertest.Metric(t, r.Registry(), "shardlimit_router_http_connections_refused_total", global); got < 1 {
		t.Fatalf("%v HTTP connections refused, want at least 1", got)
	}
	if got := clustertest.Metric(t, r.Registry(), "shardlimit_router_connections_refused_total", global); got != 0 {
		t.Fatalf("%v gRPC connections refused for HTTP's bound, want 0", got)
	}
	held.Close()
	poll.Until(t, 30*time.Second, req)
}

// With a shard dead, its users' answers are made by failure policy and
// say so: /v1/check's decision has failurePolicy and no RateLimit fields
// (no counter was read), and /json's answer carries the dynamic metadata
// that marks the descriptor, as on gRPC.
func TestHTTPAPIFailurePolicy(t *testing.T) {
	c := start(t, clustertest.Options{Insecure: true, Shard: func(o *shard.Options) {
		o.LeaseTTL = time.Minute // the dead shard keeps its partitions for the whole test
	}})
	a := api{t: t, base: "http://" + c.Routers[0].HTTPAddr(), client: http.DefaultClient}
	// The edge rule has no wildcard: its one counter is "*".
	victim := c.Shards[0]
	if c.Owner("edge", "checkout", "*").ID != victim.ID() {
		victim = c.Shards[1]
	}
	var user string
	for i := 0; user == ""; i++ {
		if u := "u" + strconv.Itoa(i); c.Owner("shop", "buy", u).ID == victim.ID() {
			user = u
		}
	}
	const envoyReq = `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/other"}]},{"entries":[{"key":"path","value":"/checkout"}]}]}`
	if ans := a.post("/json", envoyReq); ans.body["dynamicMetadata"] != nil {
		t.Fatalf("every shard up, yet marked: %s", ans.raw)
	}
	victim.Kill()

	ans := a.post("/v1/check", check("shop", "/buy", user))
	ans.want(t, http.StatusOK)
	if d := ans.decision(t, 0); d["allowed"] != true || d["failurePolicy"] != true {
		t.Fatalf("user of the dead shard: %s", ans.raw)
	}
	for _, f := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
		if v := ans.header.Get(f); v != "" {
			t.Fatalf("an answer by failure policy with %s %q", f, v)
		}
	}

	ans = a.post("/json", envoyReq)
	ans.want(t, http.StatusOK)
	md, _ := ans.body["dynamicMetadata"].(map[string]any)
	want := map[string]any{"shardlimit": map[string]any{"failure_policy": true, "reason": "shard_unreachable", "descriptors": []any{float64(1)}}}
	if !reflect.DeepEqual(md, want) {
		t.Fatalf("dynamicMetadata %v, want %v: %s", md, want, ans.raw)
	}
}
