package redial

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// UnackedTimeout bounds how long data sent on a connection to another
// component may go unacknowledged before the kernel closes the connection
// (TCP_USER_TIMEOUT). A peer cut off by the network acknowledges nothing,
// and without it the connection lives on through TCP's retransmissions,
// whose gaps double with the cut's length: after a 20 s cut the first one
// came 8 s after the heal, and every call waited for it. Closed, the
// connection is dialed again (ConnectParams), and the first dial after the
// heal succeeds. A peer that is alive acknowledges at the kernel level,
// whether its process runs or is stopped or starved of CPU, so only a
// silent network closes a connection for this.
const UnackedTimeout = time.Second

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

// Dialer is the TCP dialer of every connection between components: it
// sets UnackedTimeout on the socket, and while the peer answers nothing
// it dials again every SYNInterval, until the attempt's deadline. A
// refusal (the peer's host is up, nothing listens) ends the attempt at
// once, for gRPC's backoff.
func Dialer() grpc.DialOption { return grpc.WithContextDialer(dialTCP) }

// dialer dials with TCP_USER_TIMEOUT set to UnackedTimeout.
var dialer = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = setUnackedTimeout(int(fd), UnackedTimeout)
	})
	if err != nil {
		return err
	}
	return serr
}}

// dialOnce is one try of dialTCP (a variable for tests).
var dialOnce = dialer.DialContext

// dialTCP is Dialer's dial function.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	for {
		try, cancel := context.WithTimeout(ctx, SYNInterval)
		c, err := dialOnce(try, "tcp", addr)
		cancel()
		var ne net.Error
		if err == nil || ctx.Err() != nil || !errors.As(err, &ne) || !ne.Timeout() {
			return c, err
		}
	}
}
