package rpctest

import (
	"net"
	"testing"
)

// DeadAddr returns an address on 127.0.0.1 that nobody listens on: a
// dial to it is refused at once, as to a process that is gone.
func DeadAddr(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		tb.Fatal(err)
	}
	return addr
}
