package shard

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/member"
)

// A peer of an earlier version, without the Lease method, answers
// Unimplemented: it reaches this shard, so it counts as answering; a peer
// nobody listens for does not.
func TestAPeerWithoutLeaseCountsAsAnswering(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	shardlimitv1.RegisterShardServer(srv, shardlimitv1.UnimplementedShardServer{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	_ = gone.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	s := &Server{opts: Options{ID: "a"}}
	s.view.members = []member.Member{{ID: "a"}, {ID: "old", Addr: lis.Addr().String()}}
	if all, detail := s.askPeers(ctx); !all || detail["old"] != "answered (a version without Lease)" {
		t.Errorf("a peer without Lease: all answered %v, %v", all, detail)
	}
	s.view.members = append(s.view.members, member.Member{ID: "gone", Addr: goneAddr})
	if all, detail := s.askPeers(ctx); all || detail["gone"] != "silent" {
		t.Errorf("a peer nobody listens for: all answered %v, %v", all, detail)
	}
}
