package mapstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Keep is how many versions the history holds.
const Keep = 50

// ErrUnreadable means the stored map is not a valid map.
var ErrUnreadable = errors.New("unreadable shard map")

// ErrConflict means the map changed since it was read, or the writer lost
// its leadership.
var ErrConflict = errors.New("the shard map changed since it was read, or the writer is no longer the leader; nothing was written")

// Load reads the current map and its mod revision; (nil, 0) when none.
func Load(ctx context.Context, cli *clientv3.Client, layout etcd.Layout) (*shardmap.Map, int64, error) {
	resp, err := cli.Get(ctx, layout.ShardMap())
	if err != nil || len(resp.Kvs) == 0 {
		return nil, 0, err
	}
	m, err := decode(resp.Kvs[0])
	return m, resp.Kvs[0].ModRevision, err
}

// Publish writes m as the next version if the map's mod revision is still
// rev (0: no map yet) and every fence compare holds (the rebalance leader
// passes its election key, so a deposed leader cannot write), keeps it in
// the history and trims the history to Keep versions. It sets m.Version and
// m.WrittenAt.
func Publish(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, m *shardmap.Map, prev *shardmap.Map, rev int64, fence ...clientv3.Cmp) error {
	m.Version = 1
	if prev != nil {
		m.Version = prev.Version + 1
	}
	m.WrittenAt = time.Now().UTC()
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	cmp := clientv3.Compare(clientv3.ModRevision(layout.ShardMap()), "=", rev)
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(layout.ShardMap()), "=", 0)
	}
	ops := []clientv3.Op{
		clientv3.OpPut(layout.ShardMap(), string(b)),
		clientv3.OpPut(layout.ShardMapVersion(m.Version), string(b)),
	}
	if old := m.Version - Keep; old >= 1 {
		ops = append(ops, clientv3.OpDelete(layout.ShardMapVersion(1), clientv3.WithRange(layout.ShardMapVersion(old+1))))
	}
	resp, err := cli.Txn(ctx).If(append([]clientv3.Cmp{cmp}, fence...)...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("publish shard map: %w", err)
	}
	if !resp.Succeeded {
		return ErrConflict
	}
	return nil
}

// History returns the kept versions, newest first.
func History(ctx context.Context, cli *clientv3.Client, layout etcd.Layout) ([]shardmap.Map, error) {
	resp, err := cli.Get(ctx, layout.ShardMapHistory(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return nil, err
	}
	out := make([]shardmap.Map, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m, err := decode(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	return out, nil
}

// decode reads a stored map.
func decode(kv *mvccpb.KeyValue) (*shardmap.Map, error) {
	m := &shardmap.Map{}
	if err := json.Unmarshal(kv.Value, m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreadable, kv.Key, err)
	}
	return m, nil
}

// Watch calls onChange with the current map (nil when none), first once
// read and then after every change, until ctx ends. While etcd is
// unreachable it keeps the last map and retries. An unreadable map is
// logged and skipped when it replaces a good one; read first, it leaves
// nil, so the ring decides alone until a readable map is published.
func Watch(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, log *slog.Logger, onChange func(*shardmap.Map)) {
	etcd.Follow(ctx, cli, etcd.Target{Name: "shard map", Key: layout.ShardMap()}, log, follower{log, onChange})
}

// follower hands Watch's reads to onChange.
type follower struct {
	log      *slog.Logger
	onChange func(*shardmap.Map)
}

func (f follower) Reset(kvs []*mvccpb.KeyValue, _ int64) {
	if len(kvs) == 0 {
		f.onChange(nil)
		return
	}
	m, err := decode(kvs[0])
	if err != nil {
		f.log.Error("the shard map in etcd is unreadable; routing by the ring alone", "err", err)
	}
	f.onChange(m)
}

func (f follower) Apply(events []*clientv3.Event, _ int64) {
	for _, ev := range events {
		if ev.Type == clientv3.EventTypeDelete {
			f.onChange(nil)
			continue
		}
		m, err := decode(ev.Kv)
		if err != nil {
			f.log.Error("ignoring an unreadable shard map", "err", err)
			continue
		}
		f.onChange(m)
	}
}
