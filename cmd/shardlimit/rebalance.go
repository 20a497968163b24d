package main

import (
	"context"
	"crypto/tls"
	"errors"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/rebalance"
)

func rebalanceCmd() *cobra.Command {
	o := rebalance.DefaultOptions()
	var metricsListen string
	var profiles bool
	var tf tlsFlags
	var sf secureFlags
	tr := newTraceFlags()
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Run a rebalance instance: the elected leader moves hot partitions between shards.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Logger = logger()
			var err error
			if err := sf.require(&tf); err != nil {
				return err
			}
			if o.TLS, o.ShardTLS, o.EtcdTLS, err = tf.configs(tls.RequireAndVerifyClientCert); err != nil {
				return err
			}
			o.Insecure, o.GrantsFile = sf.insecure, sf.grantsFile
			traces, err := tr.start(cmd.Context(), "shardlimit-rebalance", o.ID)
			if err != nil {
				return err
			}
			defer traces.Shutdown(context.Background())
			o.Tracer = traces.TracerProvider
			j, err := rebalance.Start(cmd.Context(), o)
			if err != nil {
				return err
			}
			err = errors.Join(registerBuildInfo(j.Registry()), tf.registerExpiry(j.Registry(), "rebalance"),
				registerEtcdInsecure(j.Registry(), "rebalance", etcdPlainText(o.Etcd, o.EtcdTLS), o.Logger))
			var ops *opsServer
			if err == nil {
				ops, err = serveOps(metricsListen, profiles, j.Registry(), func() error { return nil })
			}
			if err != nil {
				j.Stop()
				return err
			}
			defer ops.close()
			<-cmd.Context().Done()
			j.Stop()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ID, "id", o.ID, "instance name in the election and run records (default: the host name)")
	f.StringVar(&o.Listen, "listen", o.Listen, "gRPC address of the Rebalancer API")
	f.StringVar(&o.Advertise, "advertise", o.Advertise, "address routers dial to reach this instance (default: the bound listen address)")
	f.StringVar(&metricsListen, "metrics-listen", "", "HTTP address serving /metrics, /healthz and /readyz (default: off)")
	f.BoolVar(&profiles, "pprof", false, pprofHelp)
	f.StringSliceVar(&o.Etcd, "etcd", o.Etcd, "etcd endpoints, comma-separated (required)")
	f.StringVar(&o.Prefix, "prefix", o.Prefix, "etcd key prefix")
	f.DurationVar(&o.Interval, "interval", o.Interval, "time between runs of the leader")
	f.Float64Var(&o.Threshold, "threshold", o.Threshold, "max/mean shard load over which a run moves partitions")
	f.IntVar(&o.MaxMoves, "max-moves", o.MaxMoves, "most partitions one run moves")
	f.DurationVar(&o.SessionTTL, "session-ttl", o.SessionTTL, "election lease; a dead leader is replaced within about this long")
	f.DurationVar(&o.EvictHold, "evict-hold", o.EvictHold, "how long a shard that routers reported unreachable, evicted by the leader (its lease revoked, its partitions taken over by live shards), is kept from joining again, 1s..1h (negative: never evict)")
	f.DurationVar(&o.Settle, "settle", o.Settle, "wait after publishing a map before the final copy of moved counters")
	f.DurationVar(&o.ProgressEvery, "progress-every", o.ProgressEvery, "least time between two writes of a running run's record to etcd (what ctl rebalance apply --wait shows)")
	f.IntVar(&o.Ring.Partitions, "partitions", o.Ring.Partitions, "number of partitions; must be equal to the routers'")
	registerLimits(f, &o.Limits)
	tf.register(f, true)
	sf.register(f)
	tr.register(f)
	return cmd
}
