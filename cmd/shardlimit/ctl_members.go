package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

func ctlMembersCmd(cf *ctlFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the live shards: address, zone, version, partitions, load, keys, host setup time.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *shardlimitv1.ListMembersResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.ListMembers(ctx, &shardlimitv1.ListMembersRequest{})
				return err
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			return printOutput(w, cf.output, resp, func() error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tADDRESS\tZONE\tVERSION\tPARTITIONS\tLOAD/MIN\tKEYS\tMEMORY\tSETUP\tUP")
				for _, m := range resp.Members {
					setup := time.Duration(m.ReadyUnixNs - m.StartedUnixNs).Round(time.Millisecond)
					up := time.Since(time.Unix(0, m.StartedUnixNs)).Round(time.Second)
					load, keys, mem := "?", "?", "?"
					if st := m.Stats; st != nil {
						load, keys, mem = fmt.Sprint(st.Load), fmt.Sprint(st.Keys), fmt.Sprintf("%.1fMiB", float64(st.MemoryBytes)/(1<<20))
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%v\t%v\n", m.Id, m.Addr, orDash(m.Zone), orDash(m.Version), m.Partitions, load, keys, mem, setup, up)
					if m.Error != "" {
						fmt.Fprintf(tw, "\t  stats: %s\n", m.Error)
					}
				}
				return tw.Flush()
			})
		},
	}
}

// orDash prints an empty field as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
