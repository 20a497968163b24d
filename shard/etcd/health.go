package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchHealth asks etcd for its status every interval until ctx ends and
// reports whether it answered within half the interval; components export
// it as their etcd_up gauge. With etcd's authentication on, the key it
// reads ("health", outside every cluster's prefix) is refused: a refusal
// went through the server, so it counts as an answer (etcdctl endpoint
// health does the same).
func WatchHealth(ctx context.Context, cli *clientv3.Client, interval time.Duration, report func(up bool)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, interval/2)
		_, err := cli.Get(pctx, "health", clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		report(err == nil || errors.Is(err, rpctypes.ErrPermissionDenied))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
