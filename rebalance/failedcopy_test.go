package rebalance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/component"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/mapstore"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/rpc/rpctest"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// fakeShard is a shard as the rebalance job sees it: it reports load on
// the partitions it owns (hot: much), and as a destination it accepts a
// first copy and fails every final copy (failFinal), as one that crashed
// before pulling does.
type fakeShard struct {
	shardlimitv1.UnimplementedShardServer
	id        string
	owned     func(id string) []uint32
	hot       bool
	failFinal bool
	mu        sync.Mutex
	finals    int
}

func (f *fakeShard) Stats(context.Context, *shardlimitv1.StatsRequest) (*shardlimitv1.StatsResponse, error) {
	load := make([]uint64, failedCopyPartitions)
	for _, p := range f.owned(f.id) {
		load[p] = 1
		if f.hot {
			load[p] = 100
		}
	}
	return &shardlimitv1.StatsResponse{Id: f.id, PartitionLoad: load}, nil
}

func (f *fakeShard) Pull(_ context.Context, req *shardlimitv1.PullRequest) (*shardlimitv1.PullResponse, error) {
	if req.Final && f.failFinal {
		f.mu.Lock()
		f.finals++
		f.mu.Unlock()
		return nil, errors.New("crashed before pulling")
	}
	return &shardlimitv1.PullResponse{}, nil
}

func (f *fakeShard) Drop(context.Context, *shardlimitv1.DropRequest) (*shardlimitv1.DropResponse, error) {
	return &shardlimitv1.DropResponse{}, nil
}

const failedCopyPartitions = 64

// A run whose final copies all failed publishes a map that keeps their
// partitions with their source, and its record says so: it lists no move
// (it listed the planned moves, none of which the map made), names the
// pairs not handed over, and fails.
func TestRunWhoseFinalCopyFailedRecordsNoMove(t *testing.T) {
	prefix := fmt.Sprintf("/test/%s/", t.Name())
	cli, err := etcd.Dial([]string{etcdEndpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	o := rebalance.TestOptions()
	o.ID, o.Ring.Partitions = "rebalance-0", failedCopyPartitions
	o.Config = component.DefaultConfig()
	o.Etcd, o.Prefix, o.Insecure, o.Logger = []string{etcdEndpoint}, prefix, true, clustertest.Logger()
	j, err := rebalance.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Kill)

	var members []member.Member
	var ring *shardmap.Table
	owned := func(id string) []uint32 { return ring.PartitionsOf(id) }
	a := &fakeShard{id: "a", owned: owned, hot: true}
	b := &fakeShard{id: "b", owned: owned, failFinal: true}
	for _, f := range []*fakeShard{a, b} {
		members = append(members, member.Member{ID: f.id, Addr: serveFake(t, f), State: member.Serving, Started: time.Now(), Ready: time.Now()})
	}
	cfg := shardmap.DefaultConfig()
	cfg.Partitions = failedCopyPartitions
	if ring, err = shardmap.Build(cfg, members); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		registerFake(t, cli, prefix, m)
	}

	var run *shardlimitv1.RunResponse
	poll.Until(t, 30*time.Second, func() error {
		run, err = j.Run(context.Background(), &shardlimitv1.RunRequest{Trigger: "test"})
		return err
	})
	r := run.Run
	b.mu.Lock()
	finals := b.finals
	b.mu.Unlock()
	if finals == 0 || r.Outcome != "failed" || !strings.Contains(r.Error, "not handed over") || r.MapVersion != 1 {
		t.Fatalf("run with failed final copies (%d): %v", finals, r)
	}
	if len(r.Moves) != 0 {
		t.Fatalf("the record lists %d moves, want none: the map kept every planned move with its source", len(r.Moves))
	}
	m, _, err := mapstore.Load(context.Background(), cli, etcd.Layout(prefix))
	if err != nil || m.Version != 1 || m.Pinned() != 0 || len(m.Moves) != 0 {
		t.Fatalf("published map %+v (%v), want version 1 pinning nothing and moving nothing", m, err)
	}
}

// serveFake serves f as a shard's API in plain text until t ends, and
// returns its address.
func serveFake(t *testing.T, f shardlimitv1.ShardServer) string {
	t.Helper()
	return rpctest.Serve(t, func(srv *grpc.Server) { shardlimitv1.RegisterShardServer(srv, f) })
}

// registerFake writes m's member record under prefix, under a lease that
// outlives the test.
func registerFake(t *testing.T, cli *clientv3.Client, prefix string, m member.Member) {
	t.Helper()
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := member.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, etcd.Layout(prefix).Member(m.ID), string(rec), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
}
