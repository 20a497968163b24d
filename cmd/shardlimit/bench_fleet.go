package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/cmd/bench"
)

func benchFleetCmd() *cobra.Command {
	var o bench.FleetOptions
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Measure the control plane of a fleet on this machine: start time by shard count, etcd at steady state, membership changes until every router follows.",
		Long: `Measure the control plane of growing clusters on this machine (BENCHMARKS.md, "A fleet on
one machine"). For each of --sizes it starts the cluster of 'shardlimit dev --shards N' with
--routers routers (through dev's launcher, with etcd as a process of its own so that its CPU
and /metrics are its own) and times the start until every shard serves and every router
routes to all of them. On the last size it then measures etcd over --steady (requests per
second, lease keep-alives, watch events, its CPU from /proc), and --changes membership
changes, alternately a shard leaving (SIGTERM: it drains) and joining again: the time until
every router routes by the new membership (p50 and max), and etcd's requests, watch events
and CPU per change. With --rolling it then restarts every shard, one at a time, under a load
of users consuming a budget, and reports the time, the hits allowed beyond the budget (0:
exact), the policy answers and the routers' counters that say why (its routers log at debug:
once a second per shard, the checks answered without the shard's decision, by outcome).
With --users N it ends by checking N distinct users once each through the routers and
reports each shard's keys, live heap (after a collection) and resident memory, and the
bytes per key. --dir keeps the last cluster's logs. Markdown on stdout, with the 1-minute load average beside each figure;
progress on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.Fleet(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Sizes, "sizes", []int{8, 16, 32, 64}, "shard counts whose start is timed, each 2..128; the last is measured further")
	f.IntVar(&o.Routers, "routers", 8, "routers of every cluster, 1..16")
	f.IntVar(&o.Changes, "changes", 20, "membership changes timed on the last cluster, 0..200")
	f.DurationVar(&o.Steady, "steady", 10*time.Second, "how long etcd's steady state is measured (at least 1s)")
	f.BoolVar(&o.Rolling, "rolling", false, "end with a rolling restart of every shard of the last cluster, one at a time, under a load of users consuming a budget: its time, the hits allowed beyond the budget (0: exact), the policy answers")
	f.IntVar(&o.Users, "users", 0, "end by checking this many distinct users once each through the last cluster, and report the shards' memory per shard and per key (0: none)")
	f.StringVar(&o.Dir, "dir", "", "keep the last cluster's logs and data in this directory (default: a temporary one, removed)")
	f.StringVar(&o.Binary, "binary", "", "shardlimit binary that the clusters' processes run (default: this one)")
	return cmd
}
