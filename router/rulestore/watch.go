package rulestore

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/etcd"
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
	w := &watched{prefix: prefix, log: log, onChange: onChange, valid: map[string]rules.Rule{}, invalid: map[string]bool{}}
	etcd.Follow(ctx, cli, etcd.Target{Name: "rules", Key: etcd.Layout(prefix).Rules(), Prefix: true}, log, w)
}

// watched is the rule set Watch keeps.
type watched struct {
	prefix   string
	log      *slog.Logger
	onChange func(Update)
	valid    map[string]rules.Rule
	invalid  map[string]bool
}

func (w *watched) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	seen := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		seen[string(kv.Key)] = true
		w.apply(kv)
	}
	for k := range w.valid { // deleted while we were not watching
		if !seen[k] {
			delete(w.valid, k)
		}
	}
	for k := range w.invalid {
		if !seen[k] {
			delete(w.invalid, k)
		}
	}
	w.onChange(w.update(rev))
}

func (w *watched) Apply(events []*clientv3.Event, rev int64) {
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE {
			delete(w.valid, string(ev.Kv.Key))
			delete(w.invalid, string(ev.Kv.Key))
			continue
		}
		w.apply(ev.Kv)
	}
	w.onChange(w.update(rev))
}

func (w *watched) apply(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	r, err := decodeAt(w.prefix, key, kv.Value)
	if err != nil {
		_, kept := w.valid[key]
		w.log.Error("ignoring an invalid rule in etcd", "key", key, "err", err, "kept_last_valid", kept)
		w.invalid[key] = true
		return
	}
	w.valid[key] = r
	delete(w.invalid, key)
}

func (w *watched) update(rev int64) Update {
	keys := make([]string, 0, len(w.valid))
	for k := range w.valid {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	u := Update{Rules: make([]rules.Rule, 0, len(keys)), Revision: rev}
	for _, k := range keys {
		u.Rules = append(u.Rules, w.valid[k])
	}
	for k := range w.invalid {
		u.Invalid = append(u.Invalid, k)
	}
	slices.SortFunc(u.Invalid, strings.Compare)
	return u
}
