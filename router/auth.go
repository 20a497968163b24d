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

// ownHotKeys leaves in resp only the hot keys of services the caller may
// act for: a service reads its own hot keys, an operator every one.
func ownHotKeys(ctx context.Context, resp *shardlimitv1.ListMembersResponse) {
	c := auth.FromContext(ctx)
	if c.IsOperator() {
		return
	}
	for _, m := range resp.Members {
		if m.Stats == nil {
			continue
		}
		kept := m.Stats.HotKeys[:0]
		for _, k := range m.Stats.HotKeys {
			if c.Allows(k.Service) {
				kept = append(kept, k)
			}
		}
		m.Stats.HotKeys = kept
	}
}
