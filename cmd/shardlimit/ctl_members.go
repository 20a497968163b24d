package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

func ctlMembersCmd(cf *ctlFlags) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List the live shards: address, zone, version, partitions, load, keys, host setup time.",
		Long: `List the live shards: address, zone, version, partitions, load, keys,
memory, host setup time.

With -o json or -o yaml, each shard's stats summarise its load per
partition: partitions_loaded (partitions with decisions in the last
minute) and partition_load_top (the ` + fmt.Sprint(topPartitions) + ` hottest, as partition and load).
--partitions prints the whole partition_load array instead: one entry per
partition of the shard map (1024 by default), for each shard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if full && cf.output == "text" {
				return usageErrorf("--partitions: only with -o json or -o yaml (the table has no partition loads)")
			}
			var resp *shardlimitv1.ListMembersResponse
			err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (err error) {
				resp, err = c.ListMembers(ctx, &shardlimitv1.ListMembersRequest{})
				return err
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			return printOutput(w, cf.output, membersView(resp, full), func() error {
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
	cmd.Flags().BoolVar(&full, "partitions", false, "with -o json or -o yaml: print each shard's whole partition_load array (one entry per partition) instead of its summary")
	return cmd
}

// topPartitions is how many of a shard's hottest partitions the summary of
// its partition loads lists.
const topPartitions = 5

// membersView is what -o json and -o yaml print of resp: with full, all
// of it; else each shard's partition_load (one entry per partition of the
// map, 1024 by default) summarised as partitions_loaded and
// partition_load_top, its topPartitions hottest partitions.
func membersView(resp *shardlimitv1.ListMembersResponse, full bool) any {
	view := protoView(resp.ProtoReflect())
	if full {
		return view
	}
	members, _ := view.(map[string]any)["members"].([]any)
	for i, m := range resp.Members {
		stats, ok := members[i].(map[string]any)["stats"].(map[string]any)
		if !ok {
			continue
		}
		delete(stats, "partition_load")
		type load struct {
			partition int
			load      uint64
		}
		var loaded []load
		for p, l := range m.Stats.PartitionLoad {
			if l > 0 {
				loaded = append(loaded, load{p, l})
			}
		}
		stats["partitions_loaded"] = int64(len(loaded))
		slices.SortFunc(loaded, func(a, b load) int { return cmp.Or(cmp.Compare(b.load, a.load), cmp.Compare(a.partition, b.partition)) })
		top := []any{}
		for _, l := range loaded[:min(len(loaded), topPartitions)] {
			top = append(top, map[string]any{"partition": int64(l.partition), "load": l.load})
		}
		stats["partition_load_top"] = top
	}
	return view
}

// orDash prints an empty field as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
