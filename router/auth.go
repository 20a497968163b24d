package router

import (
	"context"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/auth"
)

// mayUseAll refuses a request unless its caller may act for every service
// its checks name (see auth.Caller.MayUse): nothing of a request with one
// refused check is counted.
func mayUseAll(ctx context.Context, checks []*shardlimitv1.Check) error {
	c := auth.FromContext(ctx)
	last := ""
	for i, chk := range checks {
		if i > 0 && chk.Service == last {
			continue
		}
		if err := c.MayUse(chk.Service); err != nil {
			return err
		}
		last = chk.Service
	}
	return nil
}

// membersFor leaves in resp what the caller may read: an operator reads
// everything; a service caller reads each member's id, zone, version,
// start and partition count, and the hot keys of its own services only,
// never a shard's address, its load, its keys, its memory or another
// service's hot keys, nor an error message (which may name an address).
func membersFor(ctx context.Context, resp *shardlimitv1.ListMembersResponse) {
	c := auth.FromContext(ctx)
	if c.IsOperator() {
		return
	}
	for _, m := range resp.Members {
		m.Addr = ""
		if m.Error != "" {
			m.Error = "unreachable"
		}
		if m.Stats == nil {
			continue
		}
		var own []*shardlimitv1.HotKey
		for _, k := range m.Stats.HotKeys {
			if c.Allows(k.Service) {
				own = append(own, k)
			}
		}
		m.Stats = &shardlimitv1.StatsResponse{Id: m.Stats.Id, HotKeys: own}
	}
}
