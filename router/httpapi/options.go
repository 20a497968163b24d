package httpapi

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/rpc"
)

// Options.MaxBody: its default and bounds.
const (
	DefaultMaxBody = 1 << 20
	MinBody        = 1 << 10
	MaxBody        = 64 << 20
)

// DefaultMaxConnections is Options.MaxConnections' default.
const DefaultMaxConnections = 2000

// Options configure the HTTP/JSON API's server. The router fills them
// from its own (--http-listen, --http-max-body, its TLS and Limits).
type Options struct {
	// Listen is the address to serve on, such as ":8080" or
	// "127.0.0.1:0". Required.
	Listen string
	// TLS is the server's TLS config (the router's gRPC one: creds.ServerTLS,
	// verifying client certificates when given); nil serves plain HTTP,
	// which only an insecure router does.
	TLS *tls.Config
	// MaxBody bounds a request body in bytes; a larger one is refused with
	// 413 before it is decoded. Default 1 MiB (a CheckRequest of 1000
	// checks with 256-byte users is about 400 KB of JSON); 1 KiB..64 MiB.
	MaxBody int64
	// Limits are the router's: MaxConcurrentStreams bounds the requests in
	// flight on one HTTP/2 connection, MaxConnectionIdle closes idle
	// connections, HandshakeTimeout bounds a connection's TLS handshake and
	// each request's header (ReadHeaderTimeout), AuthTimeout closes a
	// connection that has not authenticated that long after its accept
	// (Services.ConnAuth), and MaxConnectionsPerPeer
	// (at most MaxConnections below) bounds one address's connections;
	// each zero field its default (rpc.DefaultLimits). Its MaxConnections
	// is the gRPC server's and is not used here.
	Limits rpc.Limits
	// MaxConnections bounds the API's open connections, apart from the
	// gRPC server's: neither can take the other's places. Past it a new
	// connection is closed at once, counted in
	// shardlimit_router_http_connections_refused_total{reason="global"}.
	// Default 2000 (DefaultMaxConnections), 1..1000000.
	MaxConnections int
	// Registry receives shardlimit_router_http_requests_total and the
	// connection bound's shardlimit_router_http_connections and
	// shardlimit_router_http_connections_refused_total. Required.
	Registry prometheus.Registerer
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Tracer, when set, gives each request a server span (otelhttp) that
	// continues the caller's W3C trace context (traceparent), as the gRPC
	// server's stats handler does; default nil: no span is made.
	Tracer trace.TracerProvider
}

// Services are what the API serves.
type Services struct {
	// RateLimiter serves POST /v1/check. Required.
	RateLimiter shardlimitv1.RateLimiterServer
	// Envoy serves POST /json. Required.
	Envoy rlsv3.RateLimitServiceServer
	// Authorize runs around every call as the gRPC server's unary
	// interceptor does (the router's auth.Authorizer.Unary). Required: an
	// insecure router's lets every call through.
	Authorize grpc.UnaryServerInterceptor
	// ConnAuth tells which connections are authenticated (the router's
	// auth.Authorizer, whose Authorize marks them): a connection that is
	// not within Limits.AuthTimeout of its accept is closed. Default nil:
	// AuthTimeout does not apply.
	ConnAuth rpc.ConnAuthenticator
}

func (o *Options) fill() {
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Limits.Fill()
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
}

// limits returns the connection bound's limits: the router's, with the
// API's own MaxConnections; per address, the router's explicit
// --max-connections-per-peer, else the default share of the API's own
// bound (not of gRPC's), and never all of it.
func (o Options) limits() rpc.Limits {
	l := o.Limits
	l.MaxConnections = o.MaxConnections
	l.MaxConnectionsPerPeer = min(l.PerPeer(), o.MaxConnections)
	return l
}

// Validate reports the first field out of bounds, after defaults are
// filled (the router calls it before it starts anything).
func (o Options) Validate() error {
	o.fill()
	switch {
	case o.Listen == "":
		return errors.New("http listen: an address is required")
	case o.MaxBody < MinBody || o.MaxBody > MaxBody:
		return fmt.Errorf("http max body: %d bytes not in %d..%d", o.MaxBody, MinBody, MaxBody)
	case o.MaxConnections < 1 || o.MaxConnections > 1_000_000:
		return fmt.Errorf("http max connections: %d not in 1..1000000", o.MaxConnections)
	}
	return o.Limits.Validate()
}
