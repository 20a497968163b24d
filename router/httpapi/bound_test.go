package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
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
