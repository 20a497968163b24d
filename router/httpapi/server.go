package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/encoding/protojson"

	rlsgw "github.com/shardlimit/shardlimit/proto/gateway/envoy/service/ratelimit/v3"
	shardlimitgw "github.com/shardlimit/shardlimit/proto/gateway/shardlimit/v1"
	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/rpc"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// Timeouts of every connection, against clients that hold one open
// without finishing a request; the TLS handshake and each request's
// header are bounded by Limits.HandshakeTimeout (ReadHeaderTimeout, which
// net/http applies to the handshake too, being the shortest).
const (
	readTimeout    = 30 * time.Second
	writeTimeout   = 30 * time.Second
	maxHeaderBytes = 64 << 10
)

// The api label of shardlimit_router_http_requests_total: one per route,
// and other for every path the API does not serve.
const (
	apiCheck = "check"
	apiEnvoy = "envoy_json"
	apiOther = "other"
)

// Server is a running HTTP/JSON API.
type Server struct {
	srv  *http.Server
	lis  net.Listener
	done chan struct{}
}

// Start serves the API on o.Listen until Stop. It panics when s or
// o.Registry are missing: a programmer's mistake at start-up.
func Start(o Options, s Services) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.fill()
	if s.RateLimiter == nil || s.Envoy == nil || s.Authorize == nil || o.Registry == nil {
		panic("httpapi.Start: the rate limiter, the Envoy service, the authorizer and the registry are all required")
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_router_http_requests_total",
		Help: "Requests to the HTTP/JSON API (--http-listen), by api (check: /v1/check, envoy_json: /json, other: any other path) and HTTP status code.",
	}, []string{"api", "code"})
	o.Registry.MustRegister(requests)

	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			// allowed: false and remaining: 0 are answers: always print them.
			MarshalOptions: protojson.MarshalOptions{EmitUnpopulated: true},
			// A misspelt field is bad input, not a field to ignore.
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}),
		// The Authorization header is always forwarded, as "authorization"
		// metadata; the services read no other.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithErrorHandler(errorHandler),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		runtime.WithForwardResponseOption(answerHeaders),
	)
	ctx := context.Background()
	if err := shardlimitgw.RegisterRateLimiterHandlerServer(ctx, mux, rateLimiter{next: s.RateLimiter, authorize: s.Authorize}); err != nil {
		return nil, err
	}
	if err := rlsgw.RegisterRateLimitServiceHandlerServer(ctx, mux, envoyService{next: s.Envoy, authorize: s.Authorize}); err != nil {
		return nil, err
	}

	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, err
	}
	bound := rpc.NewConnBound(o.limits(), o.Registry, "router_http")
	bound.WatchAuth(s.ConnAuth)
	lis = bound.Wrap(lis)
	if o.TLS != nil {
		// The router's config offers h2 only in ALPN, as gRPC needs; Go's
		// TLS lets clients that offer http/1.1 only connect as if they had
		// offered nothing, and net/http serves them HTTP/1.1.
		lis = tls.NewListener(lis, o.TLS)
	}
	var h http.Handler = withPeer(bounded(o.MaxBody, mux))
	if o.Tracer != nil {
		h = otelhttp.NewHandler(h, "shardlimit.router/http", otelhttp.WithTracerProvider(o.Tracer),
			otelhttp.WithPropagators(tracing.Propagator), otelhttp.WithSpanNameFormatter(spanName))
	}
	srv := &http.Server{
		Handler:           counted(requests, h),
		ReadHeaderTimeout: o.Limits.HandshakeTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       o.Limits.MaxConnectionIdle,
		MaxHeaderBytes:    maxHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: int(o.Limits.MaxConcurrentStreams)},
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
		ConnContext:       bound.ConnContext, // AuthTimeout
		// A connection that carries a request is past its handshake: its
		// idle and read timeouts from then on are not handshake timeouts.
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateActive {
				rpc.Established(c)
			}
		},
	}
	hs := &Server{srv: srv, lis: lis, done: make(chan struct{})}
	go func() {
		defer close(hs.done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("http api stopped serving", "addr", lis.Addr().String(), "err", err)
		}
	}()
	o.Logger.Info("http api serving", "addr", lis.Addr().String(), "tls", o.TLS != nil)
	return hs, nil
}

// Addr returns the address the API listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Kill closes every connection at once, as a crash would, for fault
// tests.
func (s *Server) Kill() {
	_ = s.srv.Close()
	<-s.done
}

// spanName names a request's span by its route: /v1/check, /json, or
// "other", never a path a caller made up (span names must stay few).
func spanName(_ string, r *http.Request) string {
	switch r.URL.Path {
	case "/v1/check", "/json":
		return "POST " + r.URL.Path
	}
	return "other"
}

// Stop lets requests in flight finish until ctx ends, then closes every
// connection.
func (s *Server) Stop(ctx context.Context) {
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// withPeer gives each request's context the gRPC peer that the
// authorizer reads: the client's address and, over TLS, the connection
// state with the verified client certificate.
func withPeer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &peer.Peer{Addr: remoteAddr(r.RemoteAddr)}
		if r.TLS != nil {
			p.AuthInfo = credentials.TLSInfo{State: *r.TLS, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
		}
		h.ServeHTTP(w, r.WithContext(peer.NewContext(r.Context(), p)))
	})
}

func remoteAddr(s string) net.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return &net.TCPAddr{}
}

// counted counts each request by api (its route) and status code, with
// promhttp's instrumentation.
func counted(requests *prometheus.CounterVec, h http.Handler) http.Handler {
	byAPI := map[string]http.Handler{}
	for _, api := range []string{apiCheck, apiEnvoy, apiOther} {
		byAPI[api] = promhttp.InstrumentHandlerCounter(requests.MustCurryWith(prometheus.Labels{"api": api}), h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { byAPI[apiOf(r.URL.Path)].ServeHTTP(w, r) })
}

func apiOf(path string) string {
	switch path {
	case "/v1/check":
		return apiCheck
	case "/json":
		return apiEnvoy
	}
	return apiOther
}

// rateLimiter calls the router's Check through the authorizer, as the
// gRPC server does.
type rateLimiter struct {
	shardlimitv1.UnimplementedRateLimiterServer
	next      shardlimitv1.RateLimiterServer
	authorize grpc.UnaryServerInterceptor
}

func (s rateLimiter) Check(ctx context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	return call(ctx, s.authorize, s.next, shardlimitv1.RateLimiter_Check_FullMethodName, req, s.next.Check)
}

// envoyService calls the router's Envoy service through the authorizer,
// as the gRPC server does.
type envoyService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	next      rlsv3.RateLimitServiceServer
	authorize grpc.UnaryServerInterceptor
}

func (s envoyService) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return call(ctx, s.authorize, s.next, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, req, s.next.ShouldRateLimit)
}

// call runs handler on req through the interceptor in, as gRPC runs a
// unary method of srv named method.
func call[Req, Resp any](ctx context.Context, in grpc.UnaryServerInterceptor, srv any, method string, req Req, handler func(context.Context, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	resp, err := in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, func(ctx context.Context, req any) (any, error) {
		return handler(ctx, req.(Req))
	})
	if err != nil {
		return zero, err
	}
	return resp.(Resp), nil
}
