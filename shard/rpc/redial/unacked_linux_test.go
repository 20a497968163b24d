package redial

import (
	"context"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDialSetsTheUnackedTimeout: a real dial's socket carries
// TCP_USER_TIMEOUT = UnackedTimeout.
func TestDialSetsTheUnackedTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := dial(context.Background(), newDialer(UnackedTimeout).DialContext, lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if want := int(UnackedTimeout.Milliseconds()); got != want {
		t.Errorf("TCP_USER_TIMEOUT: %d ms, want %d", got, want)
	}
}
