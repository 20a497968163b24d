package rpctest

import (
	"net"
	"testing"

	"google.golang.org/grpc"
)

// Serve serves on 127.0.0.1, at a port of its own, a gRPC server with
// opts on which register registered the test's services, until tb ends,
// and returns its address: a fake peer (a shard that fails a copy, or
// holds an export) for the component under test to dial.
func Serve(tb testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	tb.Helper()
	srv := grpc.NewServer(opts...)
	register(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(srv.Stop)
	return ln.Addr().String()
}
