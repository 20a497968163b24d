package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
)

// etcdReadyPrefix starts the line `shardlimit etcd` prints once it serves,
// which scripts and the fault suite (cmd/faults) wait for.
const etcdReadyPrefix = "shardlimit etcd ready in "

func etcdCmd() *cobra.Command {
	var dataDir string
	var listenAny bool
	listen := "127.0.0.1:2379"
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run a single-member etcd server for development and tests (the embedded etcd of dev, as a process of its own).",
		Long: `Run a single-member etcd server for development and tests: the embedded
etcd of 'shardlimit dev', as a process of its own, so that it can be
stopped, killed and restarted on the same data while the other components
run (the fault suite, cmd/faults, does that). Production runs a real etcd
cluster.

It prints one line once it serves clients:
  ` + etcdReadyPrefix + `<duration>: client address <host:port>, data in <dir>
and stops on SIGINT or SIGTERM. Restarted with the same --data-dir and
--listen, it serves the same keys, and the leases that were alive when it
stopped are alive again for their full TTL.

It serves plain text without authentication, for the fault suite on one
machine: it listens on loopback only, and --listen refuses another address
unless --listen-any. 'shardlimit dev' runs its etcd with TLS, client
certificates and a role per component.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireLoopback("listen", listen, listenAny, "--listen-any"); err != nil {
				return err
			}
			start := time.Now()
			dir := dataDir
			if dir == "" {
				tmp, err := os.MkdirTemp("", "shardlimit-etcd-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			}
			e, err := embedded.Start(filepath.Join(dir, "etcd"), listen)
			if err != nil {
				return err
			}
			defer e.Close()
			fmt.Fprintf(cmd.OutOrStdout(), "%s%v: client address %s, data in %s\n",
				etcdReadyPrefix, time.Since(start).Round(time.Millisecond), e.Endpoint(), dir)
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.AddCommand(etcdAuthCmd())
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "directory for etcd data, kept on exit (default: a temporary one, removed on exit)")
	f.StringVar(&listen, "listen", listen, "client address, host:port, a loopback one unless --listen-any (port 0: a free one, printed in the ready line)")
	f.BoolVar(&listenAny, "listen-any", false, "let --listen name an address other machines reach: anyone who reaches it reads and writes every grant and rule")
	return cmd
}
