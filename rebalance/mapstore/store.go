package mapstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/rebalance/shardmap"
	"github.com/shardlimit/shardlimit/shard/membership"
)

// Keep is how many versions the history holds.
const Keep = 50

// Key returns the etcd key of the current map.
func Key(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/shardmap" }

// HistoryDir returns the etcd prefix of the kept versions.
func HistoryDir(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/shardmap-history/" }

func historyKey(prefix string, version int64) string {
	return fmt.Sprintf("%s%020d", HistoryDir(prefix), version)
}

// ErrUnreadable means the stored map is not a valid map.
var ErrUnreadable = errors.New("unreadable shard map")

// ErrConflict means the map changed since it was read, or the writer lost
// its leadership.
var ErrConflict = errors.New("the shard map changed since it was read, or the writer is no longer the leader; nothing was written")

// Load reads the current map and its mod revision; (nil, 0) when none.
func Load(ctx context.Context, cli *clientv3.Client, prefix string) (*shardmap.Map, int64, error) {
	m, rev, _, err := load(ctx, cli, prefix)
	return m, rev, err
}

// load also returns the revision of the read, to watch from.
func load(ctx context.Context, cli *clientv3.Client, prefix string) (m *shardmap.Map, modRev, readRev int64, err error) {
	resp, err := cli.Get(ctx, Key(prefix))
	if err != nil {
		return nil, 0, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, resp.Header.Revision, nil
	}
	m = &shardmap.Map{}
	if err := json.Unmarshal(resp.Kvs[0].Value, m); err != nil {
		return nil, resp.Kvs[0].ModRevision, resp.Header.Revision, fmt.Errorf("%w: %s: %v", ErrUnreadable, Key(prefix), err)
	}
	return m, resp.Kvs[0].ModRevision, resp.Header.Revision, nil
}

// Publish writes m as the next version if the map's mod revision is still
// rev (0: no map yet) and every fence compare holds (the rebalance leader
// passes its election key, so a deposed leader cannot write), keeps it in
// the history and trims the history to Keep versions. It sets m.Version and
// m.WrittenAt.
func Publish(ctx context.Context, cli *clientv3.Client, prefix string, m *shardmap.Map, prev *shardmap.Map, rev int64, fence ...clientv3.Cmp) error {
	m.Version = 1
	if prev != nil {
		m.Version = prev.Version + 1
	}
	m.WrittenAt = time.Now().UTC()
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	cmp := clientv3.Compare(clientv3.ModRevision(Key(prefix)), "=", rev)
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(Key(prefix)), "=", 0)
	}
	ops := []clientv3.Op{
		clientv3.OpPut(Key(prefix), string(b)),
		clientv3.OpPut(historyKey(prefix, m.Version), string(b)),
	}
	if old := m.Version - Keep; old >= 1 {
		ops = append(ops, clientv3.OpDelete(historyKey(prefix, 1), clientv3.WithRange(historyKey(prefix, old+1))))
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
func History(ctx context.Context, cli *clientv3.Client, prefix string) ([]shardmap.Map, error) {
	resp, err := cli.Get(ctx, HistoryDir(prefix), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return nil, err
	}
	out := make([]shardmap.Map, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var m shardmap.Map
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Watch calls onChange with the current map (nil when none), first once
// read and then after every change, until ctx ends. While etcd is
// unreachable it keeps the last map and retries. An unreadable map is logged
// and skipped, keeping the last good one.
func Watch(ctx context.Context, cli *clientv3.Client, prefix string, log *slog.Logger, onChange func(*shardmap.Map)) {
	var backoff membership.Backoff
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		m, _, readRev, err := load(lctx, cli, prefix)
		cancel()
		if errors.Is(err, ErrUnreadable) {
			// With no good map to keep, the ring decides until a readable
			// map is published.
			log.Error("the shard map in etcd is unreadable; routing by the ring alone", "err", err)
			err, m = nil, nil
		}
		if err != nil {
			log.Warn("shard map read failed; keeping the last known map", "err", err, "retry_in", backoff.Next())
			if !backoff.Wait(ctx) {
				return
			}
			continue
		}
		backoff.Reset()
		onChange(m)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range cli.Watch(wctx, Key(prefix), clientv3.WithRev(readRev+1)) {
			if err := wr.Err(); err != nil {
				log.Warn("shard map watch broke; reading again", "err", err)
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					onChange(nil)
					continue
				}
				var next shardmap.Map
				if err := json.Unmarshal(ev.Kv.Value, &next); err != nil {
					log.Error("ignoring an unreadable shard map", "err", err)
					continue
				}
				onChange(&next)
			}
		}
		wcancel()
	}
}
