package rulestore

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/membership"
)

// Update is what Watch reports after every change.
type Update struct {
	// Rules are the valid rules, sorted by key. A key whose value turned
	// invalid keeps its last valid rule.
	Rules []rules.Rule
	// Invalid lists the keys whose stored value is not a valid rule now.
	Invalid []string
	// Revision is the etcd revision the update reflects.
	Revision int64
}

// Watch lists the rules under prefix and calls onChange with the full set,
// first once listed and then after every change, until ctx ends. While etcd
// is unreachable it keeps the last set and retries.
func Watch(ctx context.Context, cli *clientv3.Client, prefix string, log *slog.Logger, onChange func(Update)) {
	dir := Dir(prefix)
	valid := map[string]rules.Rule{}
	invalid := map[string]bool{}
	var backoff membership.Backoff
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := cli.Get(lctx, dir, clientv3.WithPrefix())
		cancel()
		if err != nil {
			log.Warn("rules list failed; keeping the last known rules", "err", err, "retry_in", backoff.Next())
			if !backoff.Wait(ctx) {
				return
			}
			continue
		}
		backoff.Reset()
		seen := map[string]bool{}
		for _, kv := range resp.Kvs {
			seen[string(kv.Key)] = true
			apply(prefix, kv, valid, invalid, log)
		}
		for k := range valid { // deleted while we were not watching
			if !seen[k] {
				delete(valid, k)
			}
		}
		for k := range invalid {
			if !seen[k] {
				delete(invalid, k)
			}
		}
		onChange(update(valid, invalid, resp.Header.Revision))
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range cli.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if err := wr.Err(); err != nil {
				log.Warn("rules watch broke; listing again", "err", err)
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					delete(valid, string(ev.Kv.Key))
					delete(invalid, string(ev.Kv.Key))
					continue
				}
				apply(prefix, ev.Kv, valid, invalid, log)
			}
			onChange(update(valid, invalid, wr.Header.Revision))
		}
		wcancel()
	}
}

func apply(prefix string, kv *mvccpb.KeyValue, valid map[string]rules.Rule, invalid map[string]bool, log *slog.Logger) {
	key := string(kv.Key)
	r, err := decodeAt(prefix, key, kv.Value)
	if err != nil {
		_, kept := valid[key]
		log.Error("ignoring an invalid rule in etcd", "key", key, "err", err, "kept_last_valid", kept)
		invalid[key] = true
		return
	}
	valid[key] = r
	delete(invalid, key)
}

func update(valid map[string]rules.Rule, invalid map[string]bool, rev int64) Update {
	keys := make([]string, 0, len(valid))
	for k := range valid {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	u := Update{Rules: make([]rules.Rule, 0, len(keys)), Revision: rev}
	for _, k := range keys {
		u.Rules = append(u.Rules, valid[k])
	}
	for k := range invalid {
		u.Invalid = append(u.Invalid, k)
	}
	slices.SortFunc(u.Invalid, strings.Compare)
	return u
}
