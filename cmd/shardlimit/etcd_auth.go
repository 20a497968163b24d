package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/cmd/internal/cluster"
	"github.com/shardlimit/shardlimit/shard/creds"
	etcdclient "github.com/shardlimit/shardlimit/shard/etcd"
)

// etcdAuthCmd is `shardlimit etcd auth`: what the Kubernetes manifests'
// init Job runs (deploy/k8s/etcd) and `dev` does at start.
func etcdAuthCmd() *cobra.Command {
	var endpoints []string
	var f creds.Files
	prefix := "/shardlimit/"
	users := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Turn a production etcd's authentication on with a role per component that writes only its own keys.",
		Long: `Turn an etcd cluster's authentication on for the shardlimit cluster under --prefix,
acting as etcd's root user (its client certificate, whose common name is root):

  a role and a user per component, named by the common name of the component's etcd
  client certificate (etcd takes it as the user with --client-cert-auth), without a
  password; each reads every key under --prefix and writes only its own:
    router     the rules and grants an operator changes through its Admin API
    shard      its member record (members/) and the hand-off lock (handoff/lock/)
    rebalance  the shard map, its kept versions, its election and runs
               (shardmap, shardmap-history/, rebalance/election/, rebalance/runs/)
               and the hand-off lock
  then root, and 'auth enable'.

It may run again (the Kubernetes Job does on every apply): what exists is kept, and the
permissions are granted again. The key ranges come from the code's etcd layout
(shard/etcd), so a new kind of key needs no change here. etcd must run with
--client-cert-auth. Once it is on, a certificate whose common name is no user is refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(endpoints) == 0 {
				return usageErrorf("--etcd: required")
			}
			if f.Cert == "" || f.Key == "" || f.CA == "" {
				return usageErrorf("--etcd-cert, --etcd-key and --etcd-ca: required (root's etcd client certificate, its key and the etcd servers' CA)")
			}
			tlsCfg, err := creds.ClientTLS(f, "")
			if err != nil {
				return fmt.Errorf("--etcd-cert, --etcd-key, --etcd-ca: %w", err)
			}
			cli, err := etcdclient.Dial(endpoints, tlsCfg)
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			byComponent := map[string]string{}
			for c, u := range users {
				byComponent[c] = *u
			}
			if err := etcdclient.EnableAuth(ctx, cli, etcdclient.Layout(prefix), byComponent); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "etcd authentication on for %s: users %s (router), %s (shard), %s (rebalance)\n",
				prefix, byComponent[etcdclient.Router], byComponent[etcdclient.Shard], byComponent[etcdclient.Rebalance])
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&endpoints, "etcd", nil, "etcd endpoints, comma-separated (required)")
	fl.StringVar(&prefix, "prefix", prefix, "etcd key prefix of the cluster, the components' --prefix")
	fl.StringVar(&f.Cert, "etcd-cert", "", "PEM client certificate of etcd's root user (common name root; required)")
	fl.StringVar(&f.Key, "etcd-key", "", "PEM key of --etcd-cert (required)")
	fl.StringVar(&f.CA, "etcd-ca", "", "PEM CA of the etcd servers (required)")
	for _, component := range []string{etcdclient.Router, etcdclient.Shard, etcdclient.Rebalance} {
		users[component] = fl.String(component+"-user", cluster.EtcdUsers()[component], "etcd user of the "+component+": the common name of its etcd client certificate")
	}
	return cmd
}
