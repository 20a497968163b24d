package rebalance_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

func emptyMap() *shardmap.Map {
	return &shardmap.Map{Partitions: 1024, Owners: make([]string, 1024), Reason: "test"}
}

// mapstoreFenceOfDeadLeader returns the fence a leader whose election key
// is gone would use: its key no longer exists, so the compare fails.
func mapstoreFenceOfDeadLeader(t *testing.T, cli *clientv3.Client, prefix string) clientv3.Cmp {
	t.Helper()
	resp, err := cli.Get(context.Background(), etcd.Layout(prefix).Election()+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var rev int64 = 1
	for _, kv := range resp.Kvs {
		rev = max(rev, kv.CreateRevision)
	}
	// A key that a dead leader held: any key under the election prefix that
	// is not there now, with the revision it was created at.
	return clientv3.Compare(clientv3.CreateRevision(etcd.Layout(prefix).Election()+"/dead-leader"), "=", rev)
}

// revokeLeaderSession revokes the session lease of the leader under prefix
// (the oldest key under the election prefix), as etcd expires the lease of
// a leader that died.
func revokeLeaderSession(t *testing.T, cli *clientv3.Client, prefix string) {
	t.Helper()
	resp, err := cli.Get(context.Background(), etcd.Layout(prefix).Election()+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("the leader's election key: %v (%d keys)", err, len(resp.Kvs))
	}
	if err := etcd.Revoke(context.Background(), cli, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatalf("revoke the leader's session: %v", err)
	}
}
