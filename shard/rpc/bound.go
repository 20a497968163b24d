package rpc

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

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
)

// ConnBound bounds the open connections of a listener, in all and per
// client address, and counts the ones it closes. It is a gRPC server
// option that Listen applies to its listener (gRPC has none of its own for
// this); a server of another kind (the router's HTTP API) wraps its
// listener with Wrap, with a ConnBound of its own.
type ConnBound struct {
	grpc.EmptyServerOption
	max, perPeer int
	mu           sync.Mutex
	peers        map[netip.Addr]int // open connections by client address; no zero entries
	open         atomic.Int64
	refused      map[string]prometheus.Counter // by reason
}

// NewConnBound returns the bound of l (MaxConnections, PerPeer), with its
// metrics registered on reg: shardlimit_<name>_connections (open now) and
// shardlimit_<name>_connections_refused_total{reason} (global, per_peer,
// handshake_timeout; every series exported from the start). name is the
// component ("router", "shard", "rebalance") or a server of its
// ("router_http"). It panics if they are registered twice: a programmer's
// mistake at start-up.
func NewConnBound(l Limits, reg prometheus.Registerer, name string) *ConnBound {
	l.Fill()
	b := &ConnBound{max: l.MaxConnections, perPeer: l.PerPeer(), peers: map[netip.Addr]int{}, refused: map[string]prometheus.Counter{}}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardlimit_" + name + "_connections_refused_total",
		Help: "Connections closed before they carried a call, by reason: global (--max-connections open), per_peer (--max-connections-per-peer open from its address), handshake_timeout (TLS and HTTP/2 setup not done within --handshake-timeout).",
	}, []string{"reason"})
	for _, r := range []string{RefusedGlobal, RefusedPerPeer, RefusedHandshakeTimeout} {
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
	for _, o := range opts {
		if b, ok := o.(*ConnBound); ok {
			return b.Wrap(lis)
		}
	}
	return lis
}

// Wrap returns lis bounded by b: it closes at once the connections it
// accepts past the bound, and counts them.
func (b *ConnBound) Wrap(lis net.Listener) net.Listener {
	return &boundListener{Listener: lis, b: b}
}

// admit takes a place for a connection from addr, or returns why not.
func (b *ConnBound) admit(addr netip.Addr) (reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.open.Load() >= int64(b.max):
		return RefusedGlobal
	case b.peers[addr] >= b.perPeer:
		return RefusedPerPeer
	}
	b.peers[addr]++
	b.open.Add(1)
	return ""
}

// release gives back the place of a connection from addr.
func (b *ConnBound) release(addr netip.Addr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peers[addr]--; b.peers[addr] <= 0 {
		delete(b.peers, addr)
	}
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
		p := peerOf(c)
		if reason := l.b.admit(p); reason != "" {
			l.b.refused[reason].Inc()
			_ = c.Close()
			continue
		}
		return &boundConn{Conn: c, b: l.b, peer: p}, nil
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
	once        sync.Once
	established atomic.Bool
	timedOut    atomic.Bool
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
	c.once.Do(func() { c.b.release(c.peer) })
	return err
}

// Established marks a connection accepted by a ConnBound's listener (or a
// TLS connection over one) as set up, so that its deadlines from then on
// are not counted as handshake timeouts. Other connections are left alone.
func Established(c net.Conn) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if bc, ok := c.(*boundConn); ok {
		bc.established.Store(true)
	}
}
