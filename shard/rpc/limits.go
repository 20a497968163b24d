package rpc

import (
	"cmp"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits bound what clients hold of a server: connections, calls in flight
// per connection, message sizes, and how long a connection stays open,
// idle or silent. The router, the shard and the rebalance job each take
// one (their Options.Limits), with the same flags (--max-connections and
// so on). Every field's zero value means its default.
type Limits struct {
	// MaxConnections bounds the open connections; default 2000. Past it a
	// new connection is closed as soon as it is accepted, and counted in
	// shardlimit_<component>_connections_refused_total{reason="global"}.
	// Connections count from accept, before TLS, so HandshakeTimeout and
	// MaxConnectionsPerPeer are what keep unauthenticated clients from
	// holding them all.
	MaxConnections int
	// MaxConnectionsPerPeer bounds the open connections from one client
	// address (IP, port ignored); past it a new connection from that
	// address is closed as soon as it is accepted, and counted under
	// reason="per_peer". Default 0: 5% of MaxConnections, at least 1 (100
	// of the default 2000), so that one address cannot take every place:
	// it takes 20 addresses to fill the server. 1..MaxConnections. Set it
	// to MaxConnections behind a proxy that hides callers' addresses.
	MaxConnectionsPerPeer int
	// HandshakeTimeout closes a connection that has not finished its TLS
	// handshake and HTTP/2 preface this long after it was accepted
	// (grpc.ConnectionTimeout; the HTTP API's ReadHeaderTimeout, which
	// bounds its TLS handshake too), counted under
	// reason="handshake_timeout"; default 5s (gRPC's own is 120s), 100ms..2m.
	HandshakeTimeout time.Duration
	// AuthTimeout closes a connection that has finished its TLS handshake
	// and HTTP/2 preface but not authenticated this long after, counted
	// under reason="auth_timeout": a connection is authenticated at once
	// by a verified client certificate that names an identity (or on a
	// server with --insecure), else by its first call whose token or
	// certificate the server knows; an anonymous Health Check does not
	// count. Without it a client with no credential holds its places until
	// MaxConnectionIdle, or for ever with a Health Check now and then.
	// Applies on servers whose ServerOptions are given a ConnAuthenticator
	// (every component's). Default 10s, 100ms..10m.
	AuthTimeout time.Duration
	// MaxConcurrentStreams bounds the calls in flight on one connection;
	// default 1000. gRPC clients wait for a free slot past it (HTTP/2
	// flow control), so it shows as client latency; a client that ignores
	// it has its extra streams refused by gRPC, which exposes no count of
	// them.
	MaxConcurrentStreams uint32
	// MaxRecvMsgSize bounds a received message in bytes; default 4 MiB
	// (gRPC's own default, made explicit). A larger one fails its call
	// with ResourceExhausted.
	MaxRecvMsgSize int
	// MaxSendMsgSize bounds a sent message in bytes; default 16 MiB. A
	// larger answer fails its call with ResourceExhausted.
	MaxSendMsgSize int
	// MaxConnectionIdle closes a connection that has had no call in flight
	// for this long (GOAWAY; the client reconnects on its next call);
	// default 5m.
	MaxConnectionIdle time.Duration
	// MaxConnectionAge closes a connection this long after it opened (±10%
	// jitter), so that long-lived clients spread over servers added since;
	// default 30m.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace lets the calls in flight on a connection past
	// MaxConnectionAge finish for this long before it is closed; default
	// 30s.
	MaxConnectionAgeGrace time.Duration
	// KeepaliveTime is how long a connection may be silent before the
	// server pings the client; default 1m.
	KeepaliveTime time.Duration
	// KeepaliveTimeout closes a connection whose ping the client does not
	// answer within it; default 20s.
	KeepaliveTimeout time.Duration
	// KeepaliveMinTime is the shortest interval at which a client may ping
	// the server; one that pings more often is disconnected (GOAWAY
	// too_many_pings); default 10s.
	KeepaliveMinTime time.Duration
	// KeepalivePermitWithoutStream lets clients ping while they have no
	// call in flight; default false: such pings count as too many.
	KeepalivePermitWithoutStream bool
}

// DefaultLimits returns the defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxConnections: 2000, MaxConcurrentStreams: 1000, HandshakeTimeout: 5 * time.Second, AuthTimeout: 10 * time.Second,
		MaxRecvMsgSize: 4 << 20, MaxSendMsgSize: 16 << 20,
		MaxConnectionIdle: 5 * time.Minute, MaxConnectionAge: 30 * time.Minute, MaxConnectionAgeGrace: 30 * time.Second,
		KeepaliveTime: time.Minute, KeepaliveTimeout: 20 * time.Second, KeepaliveMinTime: 10 * time.Second,
	}
}

// Fill sets every zero field to its default.
func (l *Limits) Fill() {
	d := DefaultLimits()
	l.MaxConnections = cmp.Or(l.MaxConnections, d.MaxConnections)
	l.MaxConcurrentStreams = cmp.Or(l.MaxConcurrentStreams, d.MaxConcurrentStreams)
	l.HandshakeTimeout = cmp.Or(l.HandshakeTimeout, d.HandshakeTimeout)
	l.AuthTimeout = cmp.Or(l.AuthTimeout, d.AuthTimeout)
	l.MaxRecvMsgSize = cmp.Or(l.MaxRecvMsgSize, d.MaxRecvMsgSize)
	l.MaxSendMsgSize = cmp.Or(l.MaxSendMsgSize, d.MaxSendMsgSize)
	l.MaxConnectionIdle = cmp.Or(l.MaxConnectionIdle, d.MaxConnectionIdle)
	l.MaxConnectionAge = cmp.Or(l.MaxConnectionAge, d.MaxConnectionAge)
	l.MaxConnectionAgeGrace = cmp.Or(l.MaxConnectionAgeGrace, d.MaxConnectionAgeGrace)
	l.KeepaliveTime = cmp.Or(l.KeepaliveTime, d.KeepaliveTime)
	l.KeepaliveTimeout = cmp.Or(l.KeepaliveTimeout, d.KeepaliveTimeout)
	l.KeepaliveMinTime = cmp.Or(l.KeepaliveMinTime, d.KeepaliveMinTime)
}

// Validate reports the first field out of bounds, naming it as its flag.
func (l *Limits) Validate() error {
	const minMsg, maxMsg = 1 << 10, 1 << 30
	positive := []struct {
		flag string
		v    time.Duration
	}{
		{"max-connection-idle", l.MaxConnectionIdle}, {"max-connection-age", l.MaxConnectionAge},
		{"keepalive-timeout", l.KeepaliveTimeout}, {"keepalive-min-time", l.KeepaliveMinTime},
	}
	switch {
	case l.MaxConnections < 1 || l.MaxConnections > 1_000_000:
		return fmt.Errorf("max-connections: %d not in 1..1000000", l.MaxConnections)
	case l.MaxConnectionsPerPeer < 0 || l.MaxConnectionsPerPeer > l.MaxConnections:
		return fmt.Errorf("max-connections-per-peer: %d not in 1..%d (max-connections), or 0 for 5%% of max-connections", l.MaxConnectionsPerPeer, l.MaxConnections)
	case l.HandshakeTimeout < 100*time.Millisecond || l.HandshakeTimeout > 2*time.Minute:
		return fmt.Errorf("handshake-timeout: %v not in 100ms..2m", l.HandshakeTimeout)
	case l.AuthTimeout < 100*time.Millisecond || l.AuthTimeout > 10*time.Minute:
		return fmt.Errorf("auth-timeout: %v not in 100ms..10m", l.AuthTimeout)
	case l.MaxConcurrentStreams < 1:
		return fmt.Errorf("max-concurrent-streams: %d is under the minimum of 1", l.MaxConcurrentStreams)
	case l.MaxRecvMsgSize < minMsg || l.MaxRecvMsgSize > maxMsg:
		return fmt.Errorf("max-recv-msg-size: %d bytes not in %d..%d", l.MaxRecvMsgSize, minMsg, maxMsg)
	case l.MaxSendMsgSize < minMsg || l.MaxSendMsgSize > maxMsg:
		return fmt.Errorf("max-send-msg-size: %d bytes not in %d..%d", l.MaxSendMsgSize, minMsg, maxMsg)
	case l.MaxConnectionAgeGrace < 0:
		return fmt.Errorf("max-connection-age-grace: %v is negative", l.MaxConnectionAgeGrace)
	case l.KeepaliveTime < time.Second:
		return fmt.Errorf("keepalive-time: %v is under gRPC's minimum of 1s", l.KeepaliveTime)
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%s: %v is not positive", p.flag, p.v)
		}
	}
	return nil
}

// PerPeer returns the connection bound of one client address:
// MaxConnectionsPerPeer, or when zero 5% of MaxConnections, at least 1.
func (l Limits) PerPeer() int {
	if l.MaxConnectionsPerPeer > 0 {
		return l.MaxConnectionsPerPeer
	}
	return max(1, l.MaxConnections/20)
}

// ServerOptions returns the gRPC server options that enforce l (filled
// with defaults), for Listen: the connection bound (a ConnBound, which
// Listen applies to its listener and its TLS credentials, and which closes
// the connections that do not authenticate within AuthTimeout, with
// interceptors that give each call its connection: put these options ahead
// of the auth interceptors), the handshake deadline, and the bounds of
// streams, messages and connection lifetime. The bound is counted in
// metrics registered on reg (see NewConnBound), named for component. auth
// (the server's auth.Authorizer) tells the bound which connections are
// authenticated; with nil, AuthTimeout does not apply. It panics if the
// metrics are registered twice: a programmer's mistake at start-up.
func (l Limits) ServerOptions(reg prometheus.Registerer, component string, auth ConnAuthenticator) []grpc.ServerOption {
	l.Fill()
	b := NewConnBound(l, reg, component)
	b.WatchAuth(auth)
	return []grpc.ServerOption{
		b, grpc.ChainUnaryInterceptor(b.unary), grpc.ChainStreamInterceptor(b.stream),
		grpc.ConnectionTimeout(l.HandshakeTimeout),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.MaxRecvMsgSize(l.MaxRecvMsgSize),
		grpc.MaxSendMsgSize(l.MaxSendMsgSize),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: l.MaxConnectionIdle, MaxConnectionAge: l.MaxConnectionAge,
			MaxConnectionAgeGrace: l.MaxConnectionAgeGrace, Time: l.KeepaliveTime, Timeout: l.KeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: l.KeepaliveMinTime, PermitWithoutStream: l.KeepalivePermitWithoutStream,
		}),
	}
}
