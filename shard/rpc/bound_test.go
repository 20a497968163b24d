package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

// Two client addresses on loopback: Linux routes all of 127/8 to lo, so a
// connection from 127.0.0.2 is another peer than one from 127.0.0.1.
var (
	attacker   = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	legitimate = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
)

// tlsServer starts a TLS server (client certificates verified if given, as
// the router's) bounded by l, and returns it, its registry and a client
// TLS config that verifies it.
func tlsServer(t *testing.T, l Limits) (*Server, *prometheus.Registry, *tls.Config) {
	t.Helper()
	lt := rpctest.NewLocalTLS(t)
	srvTLS, cliTLS := lt.Server, lt.CAOnly
	reg := prometheus.NewRegistry()
	s, err := Listen("127.0.0.1:0", srvTLS, l.ServerOptions(reg, "test", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(s.Kill)
	return s, reg, cliTLS
}

// idle opens n TCP connections to addr from the address from that never
// start TLS; they close with the test.
func idle(t *testing.T, addr string, from *net.TCPAddr, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: from, Timeout: 10 * time.Second}
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("idle connection %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// refused returns shardlimit_test_connections_refused_total{reason}.
func refused(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "shardlimit_test_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no refusals series for reason %s", reason)
	return 0
}

// wantMetric polls until metric of reg is want.
func wantMetric(t *testing.T, reg *prometheus.Registry, name string, get func() float64, want float64) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() error {
		if got := get(); got != want {
			return fmt.Errorf("%s = %v, want %v", name, got, want)
		}
		return nil
	})
}

// healthFrom is a Health client over TLS whose connections come from the
// address from.
func healthFrom(t *testing.T, addr string, cfg *tls.Config, from *net.TCPAddr) healthpb.HealthClient {
	t.Helper()
	d := net.Dialer{LocalAddr: from}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// Issue 23: 2,000 idle TCP connections from one address, the default
// --max-connections, used to take every place for 120 s. With the
// per-peer bound that address holds 100 (5% of 2,000), the other 1,900
// are closed at accept and counted, and a client from another address is
// served. The same attack with the per-peer bound at --max-connections
// (the bound before it existed) locks that client out.
func TestIdleConnectionsFromOneAddressLeaveRoomForOthers(t *testing.T) {
	const attack = 2000
	for _, c := range []struct {
		name    string
		perPeer int
		held    float64
		served  bool
	}{
		{"per-peer bound", 0, 100, true},
		{"no per-peer bound", attack, attack, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A long handshake deadline, so that the attack holds its places
			// for the whole test.
			s, reg, cliTLS := tlsServer(t, Limits{MaxConnections: attack, MaxConnectionsPerPeer: c.perPeer, HandshakeTimeout: time.Minute})
			idle(t, s.Addr(), attacker, attack)
			wantMetric(t, reg, "shardlimit_test_connections", func() float64 { return metric(t, reg, "shardlimit_test_connections") }, c.held)
			wantMetric(t, reg, "per_peer refusals", func() float64 { return refused(t, reg, RefusedPerPeer) }, attack-c.held)
			hc := healthFrom(t, s.Addr(), cliTLS, legitimate)
			if !c.served {
				if err := check(hc); err == nil {
					t.Fatal("a client was served while the attack held every place")
				}
				if got := refused(t, reg, RefusedGlobal); got < 1 {
					t.Fatalf("%v global refusals, want at least 1", got)
				}
				return
			}
			poll.Until(t, 30*time.Second, func() error { return check(hc) })
		})
	}
}

// A connection that has not finished its TLS handshake and HTTP/2 preface
// within --handshake-timeout is closed and counted: one that never starts
// TLS, and one that finishes TLS but never sends the preface. A connection
// that carries calls is not.
func TestHandshakeTimeoutClosesIdleConnections(t *testing.T) {
	const n = 50
	s, reg, cliTLS := tlsServer(t, Limits{HandshakeTimeout: time.Second})
	hc := healthFrom(t, s.Addr(), cliTLS, legitimate)
	poll.Until(t, 30*time.Second, func() error { return check(hc) })
	conns := idle(t, s.Addr(), attacker, n)
	h2 := cliTLS.Clone()
	h2.NextProtos = []string{"h2"} // gRPC refuses a TLS client that does not offer it
	tlsOnly, err := tls.DialWithDialer(&net.Dialer{LocalAddr: attacker, Timeout: 10 * time.Second}, "tcp", s.Addr(), h2)
	if err != nil {
		t.Fatal(err)
	}
	defer tlsOnly.Close()
	conns = append(conns, tlsOnly)
	wantMetric(t, reg, "handshake_timeout refusals", func() float64 { return refused(t, reg, RefusedHandshakeTimeout) }, n+1)
	wantMetric(t, reg, "shardlimit_test_connections", func() float64 { return metric(t, reg, "shardlimit_test_connections") }, 1)
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The TLS one may read the server's HTTP/2 settings first.
		if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("idle connection %d: read %v, want it closed by the server", i, err)
		}
	}
	if err := check(hc); err != nil {
		t.Fatalf("the established connection after the deadline: %v", err)
	}
	if got := refused(t, reg, RefusedHandshakeTimeout); got != n+1 {
		t.Fatalf("%v handshake timeouts, want %d: the established connection was counted", got, n+1)
	}
}

func TestPerPeerValidate(t *testing.T) {
	l := DefaultLimits()
	if got := l.PerPeer(); got != 100 {
		t.Fatalf("default per-peer bound %d, want 100 (5%% of 2000)", got)
	}
	l.MaxConnections = 10
	if got := l.PerPeer(); got != 1 {
		t.Fatalf("per-peer bound of 10 connections %d, want at least 1", got)
	}
	l.MaxConnectionsPerPeer = 11
	if err := l.Validate(); err == nil || err.Error() != "max-connections-per-peer: 11 not in 1..10 (max-connections), or 0 for 5% of max-connections" {
		t.Fatalf("per-peer over max-connections: %v", err)
	}
	l = DefaultLimits()
	l.HandshakeTimeout = 3 * time.Minute
	if err := l.Validate(); err == nil || err.Error() != "handshake-timeout: 3m0s not in 100ms..2m" {
		t.Fatalf("handshake timeout: %v", err)
	}
}
