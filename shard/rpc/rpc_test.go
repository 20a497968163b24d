package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

// serve starts a server with limits (over the defaults) and returns it
// with its registry.
func serve(t *testing.T, l Limits) (*Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := Listen("127.0.0.1:0", nil, l.ServerOptions(reg, "test", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	s.Serve()
	t.Cleanup(s.Kill)
	return s, reg
}

func dial(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// metric returns the value of a gauge or counter of reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func check(hc healthpb.HealthClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// A server bounded to N connections closes the N+1th as soon as it is
// accepted, counts it, and takes new ones again once one closes.
func TestMaxConnectionsRefusesAndCounts(t *testing.T) {
	const n = 3
	s, reg := serve(t, Limits{MaxConnections: n, MaxConnectionsPerPeer: n})
	var held []net.Conn
	for range n {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	poll.Until(t, 10*time.Second, func() error {
		if got := metric(t, reg, "shardlimit_test_connections"); got != n {
			return fmt.Errorf("%v connections open, want %d", got, n)
		}
		return nil
	})
	extra, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection %d: read %v, want it closed by the server", n+1, err)
	}
	if got := refused(t, reg, RefusedGlobal); got != 1 {
		t.Fatalf("%v refusals counted, want 1", got)
	}
	full, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	if err := check(healthpb.NewHealthClient(full)); status.Code(err) != codes.Unavailable {
		t.Fatalf("a call while full: %v, want Unavailable", err)
	}
	// Closed first: it would reconnect in the background and could take
	// the slot freed next.
	_ = full.Close()
	held[0].Close()
	poll.Until(t, 10*time.Second, func() error {
		if got := metric(t, reg, "shardlimit_test_connections"); got != n-1 {
			return fmt.Errorf("%v connections open, want %d", got, n-1)
		}
		return nil
	})
	hc := dial(t, s.Addr())
	poll.Until(t, 30*time.Second, func() error { return check(hc) })
}

// A connection with no call in flight is closed after MaxConnectionIdle.
func TestIdleConnectionsClose(t *testing.T) {
	s, reg := serve(t, Limits{MaxConnectionIdle: 50 * time.Millisecond})
	// A loaded machine may stall the call between the dial and its
	// stream past the 50ms, closing the connection under it: try again.
	hc := dial(t, s.Addr())
	poll.Until(t, 30*time.Second, func() error { return check(hc) })
	poll.Until(t, 10*time.Second, func() error {
		if got := metric(t, reg, "shardlimit_test_connections"); got != 0 {
			return fmt.Errorf("%v connections still open", got)
		}
		return nil
	})
}

func TestMaxRecvMsgSize(t *testing.T) {
	s, _ := serve(t, Limits{MaxRecvMsgSize: 1 << 10})
	hc := dial(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("x", 2<<10)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 2 KiB request to a 1 KiB bound: %v, want ResourceExhausted", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, c := range []struct {
		set  func(*Limits)
		flag string
	}{
		{func(l *Limits) { l.MaxConnections = -1 }, "max-connections"},
		{func(l *Limits) { l.MaxRecvMsgSize = 10 }, "max-recv-msg-size"},
		{func(l *Limits) { l.MaxSendMsgSize = 2 << 30 }, "max-send-msg-size"},
		{func(l *Limits) { l.KeepaliveTime = time.Millisecond }, "keepalive-time"},
		{func(l *Limits) { l.MaxConnectionIdle = -time.Second }, "max-connection-idle"},
		{func(l *Limits) { l.MaxConnectionAgeGrace = -time.Second }, "max-connection-age-grace"},
	} {
		l := DefaultLimits()
		c.set(&l)
		if err := l.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.flag+":") {
			t.Errorf("%s: %v", c.flag, err)
		}
	}
	var l Limits
	l.Fill()
	if l != DefaultLimits() || l.Validate() != nil {
		t.Fatalf("filled zero limits %+v are not the defaults", l)
	}
}

// Invalid UTF-8 in a string field is InvalidArgument naming the field,
// for unary and streaming methods alike, not gRPC's Internal.
func TestInvalidUTF8IsInvalidArgument(t *testing.T) {
	s, _ := serve(t, Limits{})
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := rpctest.String(nil, 1, "ok\xff")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = rpctest.Invoke(ctx, conn, "/grpc.health.v1.Health/Check", req)
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "service: invalid UTF-8" {
		t.Fatalf("unary: %v, want InvalidArgument naming service", err)
	}
	err = rpctest.Stream(ctx, conn, "/grpc.health.v1.Health/Watch", req)
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "service: invalid UTF-8" {
		t.Fatalf("stream: %v, want InvalidArgument naming service", err)
	}
	// A valid request still passes.
	if err := rpctest.Invoke(ctx, conn, "/grpc.health.v1.Health/Check", rpctest.String(nil, 1, "")); err != nil {
		t.Fatalf("valid request: %v", err)
	}
}
