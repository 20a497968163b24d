package main

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"sync"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// dialTrace records what the connection to the router did, so that a
// failed call can be explained from what happened, without connecting
// again after the deadline: whether a TCP connection was made, what the
// router sent on it, and how the handshake (TLS, or none) ended. It
// follows the last connection attempt.
type dialTrace struct {
	mu sync.Mutex
	s  dialState
}

// dialState is what a dialTrace recorded of the last connection attempt.
type dialState struct {
	connected bool   // a TCP connection was made: the handshake began
	handshook bool   // the handshake ended, well or not
	err       error  // the handshake's error
	read      int    // bytes the router sent
	first     []byte // the first of them, up to firstBytes
}

// firstBytes is how much of what the router sent is kept: enough to know
// an HTTP/1 status line ("HTTP/1.1 400") or a TLS record.
const firstBytes = 64

// creds returns the transport credentials of cfg (nil: plain text) that
// record into t.
func (t *dialTrace) creds(cfg *tls.Config) credentials.TransportCredentials {
	c := insecure.NewCredentials()
	if cfg != nil {
		c = credentials.NewTLS(cfg)
	}
	return tracedCreds{TransportCredentials: c, t: t}
}

// tracedCreds are transport credentials that record each handshake and
// what the router sends into a dialTrace.
type tracedCreds struct {
	credentials.TransportCredentials
	t *dialTrace
}

func (c tracedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c.t.mu.Lock()
	c.t.s = dialState{connected: true}
	c.t.mu.Unlock()
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, tracedConn{Conn: raw, t: c.t})
	c.t.mu.Lock()
	c.t.s.handshook, c.t.s.err = true, err
	c.t.mu.Unlock()
	return conn, info, err
}

func (c tracedCreds) Clone() credentials.TransportCredentials {
	return tracedCreds{TransportCredentials: c.TransportCredentials.Clone(), t: c.t}
}

// tracedConn counts what the router sends.
type tracedConn struct {
	net.Conn
	t *dialTrace
}

func (c tracedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.t.mu.Lock()
		c.t.s.read += n
		if k := min(n, firstBytes-len(c.t.s.first)); k > 0 {
			c.t.s.first = append(c.t.s.first, b[:k]...)
		}
		c.t.mu.Unlock()
	}
	return n, err
}

// state returns a copy of what t recorded.
func (t *dialTrace) state() dialState {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.first = slices.Clone(s.first)
	return s
}
