package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// Server is a component's gRPC server: register services on it (it is a
// grpc.ServiceRegistrar; see RegisterService), then Serve.
type Server struct {
	GRPC   *grpc.Server
	health *health.Server
	lis    net.Listener
}

// streamWorkers is the number of goroutines that serve calls and are kept
// between them, so that a call does not start on a new goroutine whose
// stack must grow (runtime.morestack was a seventh of a router's CPU);
// past it, a call gets a goroutine of its own.
const streamWorkers = 64

// Listen listens on addr and builds a server with TLS when tlsCfg is set
// (requiring client certificates when the config says so), with the gRPC
// health service and server reflection registered, and the options given
// (Limits.ServerOptions' among them). Requests that do not decode are
// answered InvalidArgument (see RegisterService).
func Listen(addr string, tlsCfg *tls.Config, opts ...grpc.ServerOption) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	lis = Bound(lis, opts) // Limits.ServerOptions' connection bound
	opts = append([]grpc.ServerOption{grpc.NumStreamWorkers(streamWorkers)}, opts...)
	if tlsCfg != nil {
		tc := credentials.NewTLS(tlsCfg)
		if b := boundIn(opts); b != nil {
			tc = b.creds(tc) // its AuthTimeout starts when TLS is done
		}
		opts = append(opts, grpc.Creds(tc))
	}
	opts = append(opts, grpc.ForceServerCodecV2(newCodec()))
	s := &Server{GRPC: grpc.NewServer(opts...), health: health.NewServer(), lis: lis}
	healthpb.RegisterHealthServer(s, s.health)
	reflection.Register(s)
	return s, nil
}

// Serve starts serving in the background, until Stop or Kill.
func (s *Server) Serve() { go func() { _ = s.GRPC.Serve(s.lis) }() }

// Drain reports NOT_SERVING on health while calls are still served, so
// that load balancers and probes move away before the server stops.
func (s *Server) Drain() { s.health.Shutdown() }

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Stop reports NOT_SERVING on health, lets calls in flight finish until
// ctx ends, then closes every connection.
func (s *Server) Stop(ctx context.Context) {
	s.Drain()
	done := make(chan struct{})
	go func() { s.GRPC.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.GRPC.Stop()
	}
}

// Kill closes every connection at once, as a crash would.
func (s *Server) Kill() {
	s.health.Shutdown()
	s.GRPC.Stop()
}
