package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shardlimit/shardlimit/cmd/bench"
)

func benchTableCmd() *cobra.Command { return &cobra.Command{Use: "table"} }

func benchNoopCmd() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "noop",
		Short: "Serve the baseline's no-op server (both APIs) as a process of its own, until interrupted.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := bench.StartBaseline(listen)
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
	return cmd
}
