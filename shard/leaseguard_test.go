package shard

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/etcd/etcdtest"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
)

// A peer of an earlier version, without the Lease method, answers
// Unimplemented: it reaches this shard, so it counts as answering; a peer
// nobody listens for does not.
func TestAPeerWithoutLeaseCountsAsAnswering(t *testing.T) {
	old := servePeer(t, shardlimitv1.UnimplementedShardServer{})
	goneAddr := rpctest.DeadAddr(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	s := &Server{opts: Options{ID: "a"}}
	s.view.members = []member.Member{{ID: "a"}, {ID: "old", Addr: old}}
	if all, detail := s.askPeers(ctx); !all || detail["old"] != "answered (a version without Lease)" {
		t.Errorf("a peer without Lease: all answered %v, %v", all, detail)
	}
	s.view.members = append(s.view.members, member.Member{ID: "gone", Addr: goneAddr})
	if all, detail := s.askPeers(ctx); all || detail["gone"] != "silent" {
		t.Errorf("a peer nobody listens for: all answered %v, %v", all, detail)
	}
}

// servePeer serves peer's shard API for the test, and returns its
// address.
func servePeer(t *testing.T, peer shardlimitv1.ShardServer) string {
	return rpctest.Serve(t, func(srv *grpc.Server) { shardlimitv1.RegisterShardServer(srv, peer) })
}

// leasePeer answers Lease with a fixed answer.
type leasePeer struct {
	shardlimitv1.UnimplementedShardServer
	resp *shardlimitv1.LeaseResponse
}

func (p leasePeer) Lease(context.Context, *shardlimitv1.LeaseRequest) (*shardlimitv1.LeaseResponse, error) {
	return p.resp, nil
}

// A process that holds no member record while etcd answers it (restarted
// at the address of a record whose lease runs on) does not count: the
// record it does not hold may be handed this shard's partitions, which a
// taker then takes over from it, not from this shard. One that etcd does
// not answer either counts: etcd down for everyone must not stop the
// limiter.
func TestAnUnregisteredPeerThatEtcdAnswersDoesNotCount(t *testing.T) {
	serve := func(resp *shardlimitv1.LeaseResponse) string { return servePeer(t, leasePeer{resp: resp}) }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	s := &Server{opts: Options{ID: "a"}}
	down := serve(&shardlimitv1.LeaseResponse{Id: "b", EtcdAnsweredAgoMs: -1})
	s.view.members = []member.Member{{ID: "a"}, {ID: "b", Addr: down}}
	if all, detail := s.askPeers(ctx); !all {
		t.Errorf("an unregistered peer that etcd does not answer: all answered %v, %v", all, detail)
	}
	starting := serve(&shardlimitv1.LeaseResponse{Id: "b", EtcdAnsweredAgoMs: -1, UnregisteredEtcdAnswers: true})
	s.view.members = []member.Member{{ID: "a"}, {ID: "b", Addr: starting}}
	if all, detail := s.askPeers(ctx); all || detail["b"] != unregistered {
		t.Errorf("an unregistered peer that etcd answers: all answered %v, %v", all, detail)
	}
}

// An unregistered process says so only when etcd answers it: with etcd
// down for everyone, it must count as answering, so that the limiter goes
// on deciding.
func TestLeaseSaysUnregisteredOnlyWhenEtcdAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	up := &Server{opts: Options{ID: "b"}, etcd: etcdtest.Start(t)}
	if resp, err := up.Lease(ctx, &shardlimitv1.LeaseRequest{}); err != nil || !resp.UnregisteredEtcdAnswers {
		t.Errorf("unregistered, etcd up: %v, %v", resp, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{rpctest.DeadAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	down := &Server{opts: Options{ID: "b"}, etcd: cli}
	if resp, err := down.Lease(ctx, &shardlimitv1.LeaseRequest{}); err != nil || resp.UnregisteredEtcdAnswers {
		t.Errorf("unregistered, etcd down: %v, %v", resp, err)
	}
}
