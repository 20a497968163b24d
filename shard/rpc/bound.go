package rpc

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// Reasons a connection is closed before it carries a call: the reason
// label of shardlimit_<name>_connections_refused_total.
const (
	// RefusedGlobal: MaxConnections were open when it was accepted.
	RefusedGlobal = "global"
	// RefusedPerPeer: MaxConnectionsPerPeer were open from its address.
	RefusedPerPeer = "per_peer"
	// RefusedHandshakeTimeout: its TLS handshake (or HTTP/2 preface, or
	// an HTTP request's header) was not done within HandshakeTimeout.
	RefusedHandshakeTimeout = "handshake_timeout"
	// RefusedAuthTimeout: it finished its handshake but did not
	// authenticate within AuthTimeout (authtimeout.go).
	RefusedAuthTimeout = "auth_timeout"
)

// ConnBound bounds the open connections of a listener, in all and per
// client address, and how long each may stay without authenticating
// (AuthTimeout, authtimeout.go), and counts the ones it closes. It is a
// gRPC server option that Listen applies to its listener and its TLS
// credentials (gRPC has none of its own for this); a server of another
// kind (the router's HTTP API) wraps its listener with Wrap, with a
// ConnBound of its own, and serves with its ConnContext.
type ConnBound struct {
	grpc.EmptyServerOption
	max, perPeer int
	authTimeout  time.Duration
	auth         ConnAuthenticator // nil: AuthTimeout does not apply
	mu           sync.Mutex
	peers        map[netip.Addr]int // open connections by client address; no zero entries
	conns        sync.Map           // net.Addr (RemoteAddr) → *boundConn: the open connections, for tag
	open         atomic.Int64
	refused      map[string]prometheus.Counter // by reason
}

// NewConnBound returns the bound of l (MaxConnections, PerPeer), with its
// metrics registered on reg: shardlimit_<name>_connections (open now) and
// shardlimit_<name>_connections_refused_total{reason} (global, per_peer,
// handshake_timeout, auth_timeout; every series exported from the start).
// name is the component ("router", "shard", "rebalance") or a server of
// its ("router_http"). It panics if they are registered twice: a programmer's
// mistake at start-up.
func NewConnBound(l Limits, reg prometheus.Registerer, name string) *ConnBound {
	l.Fill()
	b := &ConnBound{max: l.MaxConnections, perPeer: l.PerPeer(), authTimeout: l.AuthTimeout,
		peers: map[netip.Addr]int{}, refused: map[string]prometheus.Counter{}}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_" + name + "_connections_refused_total",
		Help: "Connections closed before they carried a call, by reason: global (--max-connections open), per_peer (--max-connections-per-peer open from its address), handshake_timeout (TLS and HTTP/2 setup not done within --handshake-timeout), auth_timeout (set up but not authenticated within --auth-timeout).",
	}, []string{"reason"})
	for _, r := range []string{RefusedGlobal, RefusedPerPeer, RefusedHandshakeTimeout, RefusedAuthTimeout} {
		b.refused[r] = refused.WithLabelValues(r)
	}
	reg.MustRegister(refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "shardlimit_" + name + "_connections",
		Help: "Open connections; at most --max-connections, and --max-connections-per-peer from one address.",
	}, func() float64 { return float64(b.open.Load()) }))
	return b
}

// Bound wraps lis with the ConnBound among opts, if any: Listen applies
// it.
func Bound(lis net.Listener, opts []grpc.ServerOption) net.Listener {
	if b := boundIn(opts); b != nil {
		return b.Wrap(lis)
	}
	return lis
}

// boundIn returns the ConnBound among opts, or nil.
func boundIn(opts []grpc.ServerOption) *ConnBound {
	for _, o := range opts {
		if b, ok := o.(*ConnBound); ok {
			return b
		}
	}
	return nil
}

// Wrap returns lis bounded by b: it closes at once the connections it
// accepts past the bound, and counts them.
func (b *ConnBound) Wrap(lis net.Listener) net.Listener {
	return &boundListener{Listener: lis, b: b}
}

// admit takes a place for c, or returns why not.
func (b *ConnBound) admit(c *boundConn) (reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.open.Load() >= int64(b.max):
		return RefusedGlobal
	case b.peers[c.peer] >= b.perPeer:
		return RefusedPerPeer
	}
	b.peers[c.peer]++
	b.conns.Store(c.remote, c)
	b.open.Add(1)
	return ""
}

// release gives back the place of c.
func (b *ConnBound) release(c *boundConn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peers[c.peer]--; b.peers[c.peer] <= 0 {
		delete(b.peers, c.peer)
	}
	b.conns.CompareAndDelete(c.remote, c)
	b.open.Add(-1)
}

// peerOf is the address a connection counts under: the client's IP, the
// port ignored, IPv4-mapped IPv6 as IPv4. A connection that is not TCP
// counts under the zero address.
func peerOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// boundListener closes the connections it accepts past the bound.
type boundListener struct {
	net.Listener
	b *ConnBound
}

func (l *boundListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		bc := &boundConn{Conn: c, b: l.b, peer: peerOf(c), remote: c.RemoteAddr()}
		if reason := l.b.admit(bc); reason != "" {
			l.b.refused[reason].Inc()
			_ = c.Close()
			continue
		}
		return bc, nil
	}
}

// boundConn gives its place back once closed, and counts a deadline that
// expires before it is established as a handshake timeout. A gRPC server
// sets a deadline on its connections only for their handshake
// (ConnectionTimeout), so no gRPC connection is ever marked established;
// the HTTP API marks its connections with Established once they carry a
// request, so that its idle timeouts are not counted.
type boundConn struct {
	net.Conn
	b           *ConnBound
	peer        netip.Addr
	remote      net.Addr // RemoteAddr(), its key in ConnBound.conns
	once        sync.Once
	established atomic.Bool
	timedOut    atomic.Bool
	auth        atomic.Int32               // authPending, authDone or authTimedOut
	authTimer   atomic.Pointer[time.Timer] // nil when none runs
}

func (c *boundConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.timeout(err)
	return n, err
}

func (c *boundConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.timeout(err)
	return n, err
}

// timeout counts err if it is the first deadline to expire before the
// connection is established.
func (c *boundConn) timeout(err error) {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !c.established.Load() && c.timedOut.CompareAndSwap(false, true) {
		c.b.refused[RefusedHandshakeTimeout].Inc()
	}
}

func (c *boundConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.stopAuthTimer()
		c.b.release(c)
	})
	return err
}

// Established marks a connection accepted by a ConnBound's listener (or a
// TLS connection over one) as set up, so that its deadlines from then on
// are not counted as handshake timeouts. Other connections are left alone.
func Established(c net.Conn) {
	if bc := boundOf(c); bc != nil {
		bc.established.Store(true)
	}
}

// boundOf returns the connection a ConnBound's listener accepted, under c's
// TLS if any, or nil.
func boundOf(c net.Conn) *boundConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	bc, _ := c.(*boundConn)
	return bc
}
