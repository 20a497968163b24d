package rulestore

import (
	"context"
	"log/slog"

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
	d := etcd.NewDecoded(func(key string, value []byte) (rules.Rule, error) { return decodeAt(prefix, key, value) },
		func(key string, err error, dropped bool) {
			log.Error("ignoring an invalid rule in etcd: the key counts as absent", "key", key, "err", err, "dropped_previous_rule", dropped)
		},
		func(valid []rules.Rule, invalid []string, rev int64) {
			u := Update{Invalid: invalid, Revision: rev}
			if u.Rules, u.OverBound = bounds.Keep(valid); len(u.OverBound) > 0 {
				log.Error("ignoring rules in etcd over the bounds", "rules", len(u.OverBound), "first", u.OverBound[0],
					"max_rules_per_service", bounds.PerService, "max_rules", bounds.Total)
			}
			onChange(u)
		})
	etcd.Follow(ctx, cli, etcd.Target{Name: "rules", Key: etcd.Layout(prefix).Rules(), Prefix: true}, log, d)
}
