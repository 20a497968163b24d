package runstore

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// Keep is how many run records etcd keeps.
const Keep = 100

// Record writes a run's record and trims the records past Keep. A run's
// effect does not depend on its record, so callers log a failure and go on.
func Record(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, rec *shardlimitv1.RunRecord) error {
	b, err := protojson.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := cli.Put(ctx, layout.Run(rec.StartedUnixNs), string(b)); err != nil {
		return err
	}
	// Trimming is best effort: a record too many is trimmed by the next run.
	resp, err := cli.Get(ctx, layout.Runs(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err == nil && len(resp.Kvs) > Keep {
		oldest := string(resp.Kvs[Keep].Key)
		_, _ = cli.Delete(ctx, layout.Runs(), clientv3.WithRange(oldest+"\x00"))
	}
	return nil
}

// Runs reads the last limit run records, newest first; a record that does
// not parse is left out.
func Runs(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, limit int) ([]*shardlimitv1.RunRecord, error) {
	resp, err := cli.Get(ctx, layout.Runs(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	out := make([]*shardlimitv1.RunRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r shardlimitv1.RunRecord
		if err := protojson.Unmarshal(kv.Value, &r); err == nil {
			out = append(out, &r)
		}
	}
	return out, nil
}

// Leader returns the address of the rebalance leader, or "" when none.
func Leader(ctx context.Context, cli *clientv3.Client, layout etcd.Layout) (string, error) {
	resp, err := cli.Get(ctx, layout.ElectionCandidates(), clientv3.WithFirstCreate()...)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
