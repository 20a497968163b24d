package main

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/cmd/bench"
	"github.com/shardlimit/shardlimit/shard/creds"
)

func benchTableCmd() *cobra.Command {
	var o bench.TableOptions
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Run the benchmark table: start dev clusters as processes, load each with its baseline, print the table with the machine and the command.",
		Long: `Run the whole benchmark table from one invocation (make bench). For each configuration it
starts the cluster of 'shardlimit dev --shards N' on free ports (through dev's launcher: etcd
inside this process, the router and the shards as processes), runs the bench against it with --baseline,
reads the router's and the shards' CPU from /proc over the measured phase, then stops the
cluster. Rows: 1 router and 2 shards with 1 check per request, the same through Envoy's API,
100 checks per request, an open loop at half the first row's rate, and the Go client calling
CheckOne for one check from every worker over unary Check and over CheckStream; then 1 router
with 1, 2 and 4 shards. Each row gives the load average over its measured phase and, when
checks were answered by policy, why, from the routers' counters (shard calls failed at the
deadline, open circuits, shed load). The table is Markdown on stdout; progress goes to stderr
on a terminal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			collectLessOften()
			return bench.Table(cmd.Context(), o, cmd.OutOrStdout(), terminal(cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time of every phase")
	f.DurationVar(&o.Warmup, "warmup", 2*time.Second, "warmup of every phase")
	f.IntVar(&o.Shards, "shards", 2, "shards of the main table's cluster")
	f.IntSliceVar(&o.Scaling, "scaling", []int{1, 2, 4}, "shard counts of the scaling table")
	f.IntVar(&o.Users, "users", 10000, "distinct users")
	f.IntVar(&o.Concurrency, "concurrency", 50, "requests in flight (closed loop)")
	f.IntVar(&o.ManyChecks, "many-checks", 100, "checks per request of the batched row")
	f.StringVar(&o.Binary, "binary", "", "shardlimit binary that the cluster's processes run (default: this one)")
	f.BoolVar(&o.PlainText, "plain-text", false, "run the clusters, the bench and its baseline in plain text without authentication (the components' --insecure), to measure what TLS costs (default: mutual TLS on every hop)")
	f.DurationVar(&o.RouterDeadline, "router-deadline", 0, "the routers' --deadline (default: the router's own, 20ms); the table names it, and counts policy answers by the routers' reasons either way")
	f.IntVar(&o.RouterCallsPerShard, "router-calls-per-shard", 0, "the routers' --calls-per-shard (default: the router's own, 2), to compare fewer, larger shard messages; the table names it")
	return cmd
}

func benchNoopCmd() *cobra.Command {
	var listen string
	var files creds.Files
	cmd := &cobra.Command{
		Use:   "noop",
		Short: "Serve the baseline's no-op server (both APIs) as a process of its own, until interrupted.",
		Long: `Serve the baseline's no-op server (both APIs, and CheckStream) as a process of its own, until
interrupted: its CPU, read from /proc, is a no-op server's cost per request. Plain text unless
--tls-cert and --tls-key are given; with --tls-ca too it requires a client certificate of that
CA (mutual TLS, as a router serves).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var tlsCfg *tls.Config
			if files.Cert != "" || files.Key != "" {
				auth := tls.NoClientCert
				if files.CA != "" {
					auth = tls.RequireAndVerifyClientCert
				}
				var err error
				if tlsCfg, err = creds.ServerTLS(files, auth); err != nil {
					return err
				}
			}
			s, err := bench.StartBaseline(listen, tlsCfg)
			if err != nil {
				return err
			}
			defer s.Stop()
			fmt.Fprintf(cmd.OutOrStdout(), "no-op server on %s\n", s.Addr())
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8090", "gRPC listen address")
	cmd.Flags().StringVar(&files.Cert, "tls-cert", "", "PEM server certificate (with --tls-key: serve TLS)")
	cmd.Flags().StringVar(&files.Key, "tls-key", "", "PEM key of --tls-cert")
	cmd.Flags().StringVar(&files.CA, "tls-ca", "", "PEM CA that callers' client certificates must chain to (mutual TLS)")
	return cmd
}
