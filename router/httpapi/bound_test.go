package httpapi_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/httpapi"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

// An HTTP API connection that has not finished its TLS handshake and a
// request's header within --handshake-timeout is closed and counted under
// handshake_timeout; one that has carried a request and then idles is not
// counted.
func TestHTTPAPIHandshakeTimeout(t *testing.T) {
	const n = 20
	lt := rpctest.NewLocalTLS(t)
	reg := prometheus.NewRegistry()
	s, err := httpapi.Start(httpapi.Options{
		Listen: "127.0.0.1:0", TLS: lt.Server, Registry: reg, Logger: clustertest.Logger(),
		Limits: rpc.Limits{HandshakeTimeout: time.Second},
	}, httpapi.Services{
		RateLimiter: shardlimitv1.UnimplementedRateLimiterServer{}, Envoy: rlsv3.UnimplementedRateLimitServiceServer{},
		Authorize: func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
			return nil, errors.New("refused")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })

	cli := httpClient(lt.CAOnly, false)
	resp, err := cli.Post("https://"+s.Addr()+"/v1/check", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the connection stays open, idle, past the deadline
	var idle []net.Conn
	for range n {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	timeouts := func() float64 {
		return clustertest.Metric(t, reg, "shardlimit_router_http_connections_refused_total", map[string]string{"reason": "handshake_timeout"})
	}
	poll.Until(t, 30*time.Second, func() error {
		if got := clustertest.Metric(t, reg, "shardlimit_router_http_connections", nil); got != 1 || timeouts() != n {
			return fmt.Errorf("%v connections open, %v handshake timeouts; want 1 and %d", got, timeouts(), n)
		}
		return nil
	})
	for i, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("idle connection %d still open", i)
		}
	}
	resp, err = cli.Post("https://"+s.Addr()+"/v1/check", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("status %d from a refusing authorizer", resp.StatusCode)
	}
	if got := timeouts(); got != n {
		t.Fatalf("%v handshake timeouts, want %d: the established connection was counted", got, n)
	}
}

// An HTTP API connection that has not authenticated within --auth-timeout
// of its accept is closed and counted under auth_timeout: one that
// finishes TLS and sends nothing, and one whose requests carry no
// credentials; one whose request carried a known token, and one whose
// client certificate a grant names (judged when the timeout ends, as it
// sends nothing), are kept. As with gRPC, the kept ones connect first.
func TestHTTPAPIAuthTimeout(t *testing.T) {
	lt := rpctest.NewLocalTLS(t)
	a, token := rpctest.NewAuthorizer(t, clustertest.Logger())
	reg := prometheus.NewRegistry()
	s, err := httpapi.Start(httpapi.Options{
		Listen: "127.0.0.1:0", TLS: lt.Server, Registry: reg, Logger: clustertest.Logger(),
		Limits: rpc.Limits{AuthTimeout: time.Second, HandshakeTimeout: time.Minute},
	}, httpapi.Services{
		RateLimiter: shardlimitv1.UnimplementedRateLimiterServer{}, Envoy: rlsv3.UnimplementedRateLimitServiceServer{},
		Authorize: a.Unary, ConnAuth: a,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })

	silentTLS := func(cfg *tls.Config) *tls.Conn {
		t.Helper()
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", s.Addr(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// A client with the operator's certificate that sends nothing.
	mtls := silentTLS(lt.Operator)
	// A client that authenticates by token on its first request.
	tok, tokDials := countedHTTP(lt.CAOnly)
	post := func(cli *http.Client, token string) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, "https://"+s.Addr()+"/v1/check", strings.NewReader(`{}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cli.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(tok, token); err != nil || code == http.StatusUnauthorized {
		t.Fatalf("token client: %d, %v", code, err)
	}
	// A client with no credentials, refused.
	anon, anonDials := countedHTTP(lt.CAOnly)
	if code, err := post(anon, ""); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("anonymous client: %d, %v; want 401", code, err)
	}
	// A connection that finishes TLS and sends nothing.
	silent := silentTLS(lt.CAOnly)
	_ = silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, silent); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection that sent nothing was not closed by the server")
	}
	poll.Until(t, 30*time.Second, func() error {
		_, _ = post(anon, "")
		if anonDials.Load() < 2 {
			return errors.New("the anonymous client's connection is still open")
		}
		return nil
	})
	if code, err := post(tok, token); err != nil || code == http.StatusUnauthorized {
		t.Fatalf("token client after the bound: %d, %v", code, err)
	}
	if n := tokDials.Load(); n != 1 {
		t.Fatalf("the token client connected %d times, want 1: its connection was closed", n)
	}
	// Still open: a short read times out rather than finding the end.
	_ = mtls.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := mtls.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the mTLS connection: read %v, want it still open", err)
	}
	reason := map[string]string{"reason": "auth_timeout"}
	if got := clustertest.Metric(t, reg, "shardlimit_router_http_connections_refused_total", reason); got < 2 {
		t.Fatalf("%v auth_timeout refusals, want at least 2", got)
	}
}

// countedHTTP is an HTTP/1.1 client over TLS with cfg that counts the
// connections it opens.
func countedHTTP(cfg *tls.Config) (*http.Client, *atomic.Int32) {
	dials := new(atomic.Int32)
	cli := httpClient(cfg, false)
	var d net.Dialer
	cli.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	return cli, dials
}
