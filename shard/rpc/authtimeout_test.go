package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

// authServer starts a TLS server as a component builds one: bounded by l,
// with an Authorizer that knows the operator's certificate and the token it
// returns (a service's), as the interceptors and the ConnAuthenticator.
func authServer(t *testing.T, l Limits) (*Server, *prometheus.Registry, rpctest.LocalTLS, string) {
	t.Helper()
	lt := rpctest.NewLocalTLS(t)
	a, token := rpctest.NewAuthorizer(t, slog.New(slog.DiscardHandler))
	reg := prometheus.NewRegistry()
	s, err := Listen("127.0.0.1:0", lt.Server, append(l.ServerOptions(reg, "test", a), a.ServerOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(s.Kill)
	return s, reg, lt, token
}

// countedClient is a gRPC client of addr over TLS with cfg (and opts) that
// counts the connections it opens: a count past 1 means the server closed
// its first one.
func countedClient(t *testing.T, addr string, cfg *tls.Config, opts ...grpc.DialOption) (*grpc.ClientConn, *atomic.Int32) {
	t.Helper()
	dials := new(atomic.Int32)
	var d net.Dialer
	opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, "tcp", a)
		}))
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, dials
}

// list calls Health/List, which only a known caller may.
func list(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).List(ctx, &healthpb.HealthListRequest{})
	return err
}

// watch opens Health/Watch, which only a known caller may, and reads its
// first answer.
func watch(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = w.Recv()
	return err
}

// Issue 23: a connection that finishes TLS and the HTTP/2 preface but never
// authenticates is closed after --auth-timeout and counted, even while it
// makes anonymous Health Checks; one that authenticated by a token within
// the bound (on a unary call, or on a stream), and one with a client
// certificate that names an identity, are kept past it. The steps are ordered by conditions: every kept connection
// is set up before the one that sends nothing, so its bound has passed
// once that one is closed.
func TestAuthTimeoutClosesUnauthenticatedConnections(t *testing.T) {
	s, reg, lt, token := authServer(t, Limits{AuthTimeout: time.Second, HandshakeTimeout: time.Minute})

	// A client with the operator's certificate, whose only call is
	// anonymous: its certificate authenticates it.
	mtls, mtlsDials := countedClient(t, s.Addr(), lt.Operator)
	if err := check(healthpb.NewHealthClient(mtls)); err != nil {
		t.Fatalf("mTLS client: %v", err)
	}
	// A client that authenticates by token on its first call.
	tok, tokDials := countedClient(t, s.Addr(), lt.CAOnly, grpc.WithPerRPCCredentials(creds.PerRPC(creds.StaticToken(token))))
	if err := list(tok); err != nil {
		t.Fatalf("token client: %v", err)
	}
	// A client that authenticates by token on a stream (Health/Watch).
	watcher, watcherDials := countedClient(t, s.Addr(), lt.CAOnly, grpc.WithPerRPCCredentials(creds.PerRPC(creds.StaticToken(token))))
	if err := watch(watcher); err != nil {
		t.Fatalf("token client's stream: %v", err)
	}
	// A client with no credentials that makes anonymous Health Checks.
	anon, anonDials := countedClient(t, s.Addr(), lt.CAOnly)
	if err := check(healthpb.NewHealthClient(anon)); err != nil {
		t.Fatalf("anonymous client: %v", err)
	}

	// A connection that finishes TLS and the HTTP/2 preface, then sends
	// nothing.
	h2 := lt.CAOnly.Clone()
	h2.NextProtos = []string{"h2"}
	silent, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", s.Addr(), h2)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// The client preface and an empty SETTINGS frame.
	if _, err := silent.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	_ = silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, silent); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection that sent nothing was not closed by the server")
	}

	// The anonymous client's connection is closed too, whatever its
	// Health Checks: it redials.
	poll.Until(t, 30*time.Second, func() error {
		_ = check(healthpb.NewHealthClient(anon))
		if anonDials.Load() < 2 {
			return errors.New("the anonymous client's connection is still open")
		}
		return nil
	})
	if err := list(tok); err != nil {
		t.Fatalf("token client after the bound: %v", err)
	}
	if err := check(healthpb.NewHealthClient(mtls)); err != nil {
		t.Fatalf("mTLS client after the bound: %v", err)
	}
	if err := watch(watcher); err != nil {
		t.Fatalf("token client's stream after the bound: %v", err)
	}
	if n := watcherDials.Load(); n != 1 {
		t.Fatalf("the token client of a stream connected %d times, want 1: its connection was closed", n)
	}
	if n := tokDials.Load(); n != 1 {
		t.Fatalf("the token client connected %d times, want 1: its connection was closed", n)
	}
	if n := mtlsDials.Load(); n != 1 {
		t.Fatalf("the mTLS client connected %d times, want 1: its connection was closed", n)
	}
	if got := refused(t, reg, RefusedAuthTimeout); got < 2 {
		t.Fatalf("%v auth_timeout refusals, want at least 2 (the silent and the anonymous connection)", got)
	}
	if got := refused(t, reg, RefusedHandshakeTimeout); got != 0 {
		t.Fatalf("%v handshake timeouts, want 0", got)
	}
}

func TestAuthTimeoutValidate(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Millisecond, 11 * time.Minute} {
		l := DefaultLimits()
		l.AuthTimeout = d
		if err := l.Validate(); err == nil || err.Error() != "auth-timeout: "+d.String()+" not in 100ms..10m" {
			t.Errorf("auth timeout %v: %v", d, err)
		}
	}
	l := Limits{}
	l.Fill()
	if l.AuthTimeout != 10*time.Second {
		t.Fatalf("default auth timeout %v, want 10s", l.AuthTimeout)
	}
}
