package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/etcdtest"
)

// Revoke deletes the lease's keys; a lease already gone (a revoke that the
// client retried after the server applied it) counts as revoked; other
// errors are returned.
func TestRevokeTakesALeaseNotFoundAsRevoked(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if err := etcd.Revoke(ctx, cli, lease.ID); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if resp, err := cli.Get(ctx, "k"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the lease's key after the revoke: %v, %v; want deleted", resp, err)
	}
	if err := etcd.Revoke(ctx, cli, lease.ID); err != nil {
		t.Fatalf("revoke again (not found): %v; want nil", err)
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if err := etcd.Revoke(done, cli, lease.ID); err == nil {
		t.Fatal("revoke with a canceled context: nil; want its error")
	}
}
