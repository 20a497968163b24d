package runstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/etcd"
)

// Running is the outcome of a record whose run goes on.
const Running = "running"

// ErrChanged means a record changed since its writer last wrote it: the
// next leader marked the run abandoned. The writer stops writing progress;
// its final Record still says what the run did.
var ErrChanged = errors.New("the run record was changed by another instance")

// Update writes a running run's record if nobody else wrote it since the
// writer's last write at revision rev (0: the record must not exist yet),
// and returns the revision of this write.
func Update(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, rec *shardlimitv1.RunRecord, rev int64) (int64, error) {
	b, err := protojson.Marshal(rec)
	if err != nil {
		return 0, err
	}
	key := layout.Run(rec.StartedUnixNs)
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, ErrChanged
	}
	return resp.Header.Revision, nil
}

// Abandon marks every record still running as failed: called by a new
// leader, which runs nothing yet, so that those runs' leaders are gone
// (or deposed) and whoever follows such a run learns that it ended, in
// which phase and why. It returns how many it marked.
func Abandon(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, leader string, now time.Time) (int, error) {
	resp, err := cli.Get(ctx, layout.Runs(), clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, kv := range resp.Kvs {
		var r shardlimitv1.RunRecord
		if protojson.Unmarshal(kv.Value, &r) != nil || r.Outcome != Running {
			continue
		}
		phase := "before its first phase"
		r.Outcome, r.FinishedUnixNs = "failed", now.UnixNano()
		if len(r.Phases) > 0 {
			last := r.Phases[len(r.Phases)-1]
			phase = "in phase " + last.Name
			if last.FinishedUnixNs == 0 {
				last.FinishedUnixNs, last.Error = now.UnixNano(), "abandoned"
			}
		}
		r.Error = fmt.Sprintf("abandoned %s: its leader %s lost the election before the run ended; %s leads now (`shardlimit ctl shardmap history` shows whether a map was published)", phase, r.Leader, leader)
		b, err := protojson.Marshal(&r)
		if err != nil {
			return n, err
		}
		key := string(kv.Key)
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).Then(clientv3.OpPut(key, string(b))).Commit()
		if err != nil {
			return n, err
		}
		if resp.Succeeded { // else its leader wrote meanwhile: it lives
			n++
		}
	}
	return n, nil
}
