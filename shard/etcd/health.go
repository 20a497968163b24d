package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchHealth asks etcd for its status every interval until ctx ends and
// reports whether it answered within half the interval; components export
// it as their etcd_up gauge.
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
		report(err == nil)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
