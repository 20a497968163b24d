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
