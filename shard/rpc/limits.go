package rpc

import (
	"cmp"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
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
	// shardlimit_<component>_connections_refused_total.
	MaxConnections int
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
		MaxConnections: 2000, MaxConcurrentStreams: 1000,
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

// ServerOptions returns the gRPC server options that enforce l (filled
// with defaults), for Listen. The connection bound is counted in metrics
// registered on reg: shardlimit_<component>_connections (open now) and
// shardlimit_<component>_connections_refused_total. It panics if those
// are registered twice: a programmer's mistake at start-up.
func (l Limits) ServerOptions(reg prometheus.Registerer, component string) []grpc.ServerOption {
	l.Fill()
	b := &connBound{max: int64(l.MaxConnections), refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "shardlimit_" + component + "_connections_refused_total",
		Help: "Connections closed as soon as accepted because --max-connections were open.",
	})}
	reg.MustRegister(b.refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shardlimit_" + component + "_connections",
		Help: "Open connections (gRPC, and the router's HTTP API when served); at most --max-connections.",
	}, func() float64 { return float64(b.open.Load()) }))
	return []grpc.ServerOption{
		b,
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

// connBound is the connection bound: a server option that Listen applies
// to its listener (gRPC has no option of its own for it).
type connBound struct {
	grpc.EmptyServerOption
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
}

// Bound wraps lis with the connection bound among opts, if any: Listen
// applies it, and a component that serves HTTP beside gRPC (the router's
// --http-listen) applies it to that listener too, so that both count
// against one --max-connections.
func Bound(lis net.Listener, opts []grpc.ServerOption) net.Listener {
	for _, o := range opts {
		if b, ok := o.(*connBound); ok {
			return &boundListener{Listener: lis, b: b}
		}
	}
	return lis
}

// boundListener closes the connections it accepts past the bound.
type boundListener struct {
	net.Listener
	b *connBound
}

func (l *boundListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.b.open.Add(1) <= l.b.max {
			return &boundConn{Conn: c, b: l.b}, nil
		}
		l.b.open.Add(-1)
		l.b.refused.Inc()
		_ = c.Close()
	}
}

// boundConn gives its place back once closed.
type boundConn struct {
	net.Conn
	b    *connBound
	once sync.Once
}

func (c *boundConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.b.open.Add(-1) })
	return err
}
