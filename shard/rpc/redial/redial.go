package redial

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// UnackedTimeout bounds how long data sent on a connection between
// components may go unacknowledged, or wait unsent behind a peer's full
// receive window, before the kernel closes the connection
// (TCP_USER_TIMEOUT). A peer cut off by the network acknowledges nothing,
// and without it the connection lives on through TCP's retransmissions,
// whose gaps double with the cut's length: after a 20 s cut the first one
// came 6–8 s after the heal, and every call waited for it. Closed, the
// connection is dialed again (ConnectParams), and the first dial after the
// heal succeeds. A live peer acknowledges at the kernel level, even when
// its process is stopped or starved of CPU; its receive window fills only
// when its process reads nothing while more than gRPC's flow-control
// window is in flight, which gRPC's own flow control keeps from
// happening. Between components on one network (a data centre, loopback)
// a second of silence is the network's, not the peer's. (etcd's client
// sets the socket's timeout to its keepalive timeout instead, 2 s.)
const UnackedTimeout = time.Second

// ClientUnackedTimeout is UnackedTimeout for the Go client's connections to
// routers (router/client): applications may call across a wider network,
// where a few lost segments in a row at a round trip of 150 ms would take
// a second.
const ClientUnackedTimeout = 5 * time.Second

// ConnectParams are the dial attempts of every connection between
// components, etcd's included: with Dialer, an attempt sends a new TCP SYN
// every SYNInterval until it connects (or is refused, or its 10 s pass),
// and after a failed attempt the next starts within a second (a backoff of
// 100 ms growing to 1 s), so a peer that comes back, or a network that
// heals, is reached within about SYNInterval. gRPC's defaults (20 s
// attempts in which the kernel resends a SYN after 1, 3, 7 and 15 s, and a
// backoff growing to 2 minutes) kept a healed link unused for seconds to
// minutes.
var ConnectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 10 * time.Second,
}

// SYNInterval is how often a dial through Dialer to a peer that answers
// nothing sends a new SYN (from a new socket: the kernel's own resends
// come 1, 2, 4 s... apart).
const SYNInterval = 500 * time.Millisecond

// Dialer is the dialer of every connection between components, with
// UnackedTimeout; see DialerWith.
func Dialer() grpc.DialOption { return DialerWith(UnackedTimeout) }

// DialerWith is the dialer of a connection to a component: it resolves a
// host name once per attempt, then dials its addresses in turn, a new SYN
// every SYNInterval while they answer nothing, until the attempt's
// deadline; it sets unacked as each socket's TCP_USER_TIMEOUT. A refusal
// (the peer's host is up, nothing listens) ends the attempt at once, for
// gRPC's backoff. A "unix:" address is dialed as a Unix socket, once.
// Given as a dial option, it turns off gRPC's proxy support (HTTPS_PROXY):
// a caller who needs a proxy passes a dialer of its own after it.
func DialerWith(unacked time.Duration) grpc.DialOption {
	d := newDialer(unacked)
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dial(ctx, d.DialContext, addr)
	})
}

// newDialer returns a net.Dialer that sets unacked as each socket's
// TCP_USER_TIMEOUT.
func newDialer(unacked time.Duration) *net.Dialer {
	return &net.Dialer{Control: func(network, _ string, c syscall.RawConn) error {
		if !strings.HasPrefix(network, "tcp") {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = setUnackedTimeout(int(fd), unacked)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}

// dialFunc is one try: net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// lookup resolves a host name (a variable for tests).
var lookup = net.DefaultResolver.LookupHost

// dial is DialerWith's dial function, with once for each try.
func dial(ctx context.Context, once dialFunc, addr string) (net.Conn, error) {
	if path, ok := unixPath(addr); ok {
		return once(ctx, "unix", path)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips := []string{host}
	if net.ParseIP(host) == nil {
		if ips, err = lookup(ctx, host); err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	refused := make([]bool, len(ips))
	for i, left := 0, len(ips); ; i = (i + 1) % len(ips) {
		if refused[i] {
			continue
		}
		try, cancel := context.WithTimeout(ctx, SYNInterval)
		c, err := once(try, "tcp", net.JoinHostPort(ips[i], port))
		cancel()
		var ne net.Error
		switch {
		case err == nil || ctx.Err() != nil:
			return c, err
		case errors.As(err, &ne) && ne.Timeout():
			// Silent: try again, at the next address.
		default:
			// Refused: the others may answer.
			if refused[i], left = true, left-1; left == 0 {
				return nil, err
			}
		}
	}
}

// unixPath returns the socket path of a "unix:path" or "unix://path"
// address.
func unixPath(addr string) (string, bool) {
	if p, ok := strings.CutPrefix(addr, "unix://"); ok {
		return p, true
	}
	return strings.CutPrefix(addr, "unix:")
}
