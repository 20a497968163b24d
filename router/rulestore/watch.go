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

// Update is what Watch reports after every change: a function of what
// etcd holds at Revision alone, so that every router that reads the same
// contents uses the same rules, whenever it started.
type Update struct {
	// Rules are the valid rules within the bounds, sorted by key.
	Rules []rules.Rule
	// Invalid lists the keys whose stored value is not a valid rule: they
	// count as absent (a router that held a valid rule under one drops
	// it, as a router started now never had it).
	Invalid []string
	// OverBound lists the valid rules (service/name) left out because
	// their service, or all services, hold more than the bounds allow
	// (rules.Bounds.Keep).
	OverBound []string
	// Revision is the etcd revision the update reflects.
	Revision int64
}

// Watch lists the rules under prefix and calls onChange with the full set,
// first once listed and then after every change, until ctx ends. While etcd
// is unreachable it keeps the last set and retries.
func Watch(ctx context.Context, cli *clientv3.Client, prefix string, bounds rules.Bounds, log *slog.Logger, onChange func(Update)) {
	w := &watched{prefix: prefix, bounds: bounds, log: log, onChange: onChange, valid: map[string]rules.Rule{}, invalid: map[string]bool{}}
	etcd.Follow(ctx, cli, etcd.Target{Name: "rules", Key: etcd.Layout(prefix).Rules(), Prefix: true}, log, w)
}

// watched is the rule set Watch keeps.
type watched struct {
	prefix   string
	bounds   rules.Bounds
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
		_, dropped := w.valid[key]
		w.log.Error("ignoring an invalid rule in etcd: the key counts as absent", "key", key, "err", err, "dropped_previous_rule", dropped)
		delete(w.valid, key)
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
	if u.Rules, u.OverBound = w.bounds.Keep(u.Rules); len(u.OverBound) > 0 {
		w.log.Error("ignoring rules in etcd over the bounds", "rules", len(u.OverBound), "first", u.OverBound[0],
			"max_rules_per_service", w.bounds.PerService, "max_rules", w.bounds.Total)
	}
	for k := range w.invalid {
		u.Invalid = append(u.Invalid, k)
	}
	slices.SortFunc(u.Invalid, strings.Compare)
	return u
}
