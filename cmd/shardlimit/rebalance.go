package main

import (
	"context"
	"crypto/tls"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/rebalance"
)

func rebalanceCmd() *cobra.Command {
	o := rebalance.DefaultOptions()
	sf := newServerFlags("rebalance", tls.RequireAndVerifyClientCert, &o.Config)
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Run a rebalance instance: the elected leader moves hot partitions between shards.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := func(ctx context.Context) (*rebalance.Job, error) { return rebalance.Start(ctx, o) }
			// Stop resigns and stops at once: it takes no deadline.
			stop := func(_ context.Context, j *rebalance.Job) error { j.Stop(); return nil }
			return runServer(cmd.Context(), sf, o.ID, 0, start, stop)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ID, "id", o.ID, "instance name in the election and run records (default: the host name)")
	f.StringVar(&o.Listen, "listen", o.Listen, "gRPC address of the Rebalancer API")
	f.StringVar(&o.Advertise, "advertise", o.Advertise, "address routers dial to reach this instance (default: the bound listen address)")
	f.DurationVar(&o.Interval, "interval", o.Interval, "time between runs of the leader")
	f.Float64Var(&o.Threshold, "threshold", o.Threshold, "max/mean shard load over which a run moves partitions")
	f.IntVar(&o.MaxMoves, "max-moves", o.MaxMoves, "most partitions one run moves")
	f.DurationVar(&o.SessionTTL, "session-ttl", o.SessionTTL, "election lease; a dead leader is replaced within about this long")
	f.DurationVar(&o.EvictHold, "evict-hold", o.EvictHold, "how long a shard that routers reported unreachable, evicted by the leader (its lease revoked, its partitions taken over by live shards), is kept from joining again, 1s..1h (negative: never evict)")
	f.DurationVar(&o.Settle, "settle", o.Settle, "wait after publishing a map before the final copy of moved counters")
	f.DurationVar(&o.ProgressEvery, "progress-every", o.ProgressEvery, "least time between two writes of a running run's record to etcd (what ctl rebalance apply --wait shows)")
	registerPartitions(f, &o.Ring.Partitions)
	sf.register(f, "")
	return cmd
}
