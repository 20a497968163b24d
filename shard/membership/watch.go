package membership

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch lists the members under prefix and calls onChange with the full list,
// sorted by ID, first once listed and then after every change, until ctx ends.
// While etcd is unreachable it keeps the last list and retries; it never
// calls onChange with a list it did not read.
func Watch(ctx context.Context, cli *clientv3.Client, prefix string, log *slog.Logger, onChange func([]Member)) {
	p := Prefix(prefix)
	var backoff Backoff
	for ctx.Err() == nil {
		rev, members, err := list(ctx, cli, p, log)
		if err != nil {
			log.Warn("membership list failed; keeping the last known members", "err", err, "retry_in", backoff.Next())
			if !backoff.Wait(ctx) {
				return
			}
			continue
		}
		backoff.Reset()
		onChange(sorted(members))
		follow(ctx, cli, p, rev, members, log, onChange)
	}
}

func list(ctx context.Context, cli *clientv3.Client, p string, log *slog.Logger) (int64, map[string]Member, error) {
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := cli.Get(lctx, p, clientv3.WithPrefix())
	if err != nil {
		return 0, nil, err
	}
	members := make(map[string]Member, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		add(members, kv, p, log)
	}
	return resp.Header.Revision, members, nil
}

// follow applies watch events after rev until the watch breaks.
func follow(ctx context.Context, cli *clientv3.Client, p string, rev int64, members map[string]Member, log *slog.Logger, onChange func([]Member)) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range cli.Watch(wctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			log.Warn("membership watch broke; listing again", "err", err)
			return
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				delete(members, strings.TrimPrefix(string(ev.Kv.Key), p))
			} else {
				add(members, ev.Kv, p, log)
			}
		}
		onChange(sorted(members))
	}
}

func add(members map[string]Member, kv *mvccpb.KeyValue, p string, log *slog.Logger) {
	id := strings.TrimPrefix(string(kv.Key), p)
	m, err := decode(kv.Value)
	if err != nil || m.ID != id {
		log.Warn("ignoring malformed member record", "key", string(kv.Key), "err", err)
		return
	}
	members[id] = m
}

func sorted(members map[string]Member) []Member {
	out := make([]Member, 0, len(members))
	for _, m := range members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}
