package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

func ctlRebalanceCmd(cf *ctlFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "rebalance", Short: "Preview, run and review rebalance runs (through the elected leader)."}
	plan := &cobra.Command{
		Use:   "plan",
		Short: "Print what a run would move now, as a table, changing nothing.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
				p, err := c.RebalancePlan(ctx, &shardlimitv1.PlanRequest{})
				if err != nil {
					return err
				}
				if cf.output == "json" {
					return printJSON(cmd.OutOrStdout(), p)
				}
				printPlan(cmd.OutOrStdout(), p)
				return nil
			})
		},
	}
	var wait bool
	apply := &cobra.Command{
		Use:   "apply [--wait]",
		Short: "Have the leader run now: move partitions, hand their counters over, publish a new shard map.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
				resp, err := c.RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "ctl"}, Wait: wait})
				if err != nil {
					return err
				}
				return printRun(cmd.OutOrStdout(), cf.output, resp.Run)
			})
		},
	}
	apply.Flags().BoolVar(&wait, "wait", false, "wait until the router routes by the new shard map")
	var limit uint32
	runs := &cobra.Command{
		Use:   "runs",
		Short: "List the last runs: when, why, moves, load before and after, outcome.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
				resp, err := c.RebalanceRuns(ctx, &shardlimitv1.RebalanceRunsRequest{Limit: limit})
				if err != nil {
					return err
				}
				if cf.output == "json" {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STARTED\tTRIGGER\tLEADER\tOUTCOME\tMOVES\tMAX/MEAN\tVERSION\tKEYS MOVED\tERROR")
				for _, r := range resp.Runs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.2f → %.2f\t%d\t%d\t%s\n", time.Unix(0, r.StartedUnixNs).Format(time.DateTime),
						r.Trigger, r.Leader, r.Outcome, len(r.Moves), r.RatioBefore, r.RatioAfter, r.MapVersion, r.KeysMoved, r.Error)
				}
				return tw.Flush()
			})
		},
	}
	runs.Flags().Uint32Var(&limit, "limit", 20, "how many runs")
	cmd.AddCommand(plan, apply, runs)
	return cmd
}

func ctlShardMapCmd(cf *ctlFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "shardmap", Short: "Review and roll back the published shard map."}
	history := &cobra.Command{
		Use:   "history",
		Short: "List the kept shard map versions, newest first.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
				resp, err := c.ShardMapHistory(ctx, &shardlimitv1.ShardMapHistoryRequest{})
				if err != nil {
					return err
				}
				if cf.output == "json" {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VERSION\tWRITTEN\tBY\tPINNED\tMOVES\tREASON")
				for _, v := range resp.Versions {
					mark := ""
					if v.Version == resp.InForce {
						mark = " *"
					}
					fmt.Fprintf(tw, "%d%s\t%s\t%s\t%d\t%d\t%s\n", v.Version, mark, time.Unix(0, v.WrittenUnixNs).Format(time.DateTime), v.WrittenBy, v.Pinned, len(v.Moves), v.Reason)
				}
				fmt.Fprintln(tw, "(* in force at this router)")
				return tw.Flush()
			})
		},
	}
	var to int64
	rollback := &cobra.Command{
		Use:   "rollback --to VERSION",
		Short: "Publish a kept version's pins again, handing counters over like a run.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to < 1 {
				return fmt.Errorf("to: %d is not a version (1 or more)", to)
			}
			return cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
				resp, err := c.RebalanceRun(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "ctl rollback", RollbackTo: to}, Wait: true})
				if err != nil {
					return err
				}
				return printRun(cmd.OutOrStdout(), cf.output, resp.Run)
			})
		},
	}
	rollback.Flags().Int64Var(&to, "to", 0, "version to roll back to (required)")
	_ = rollback.MarkFlagRequired("to")
	cmd.AddCommand(history, rollback)
	return cmd
}

// admin dials the router's Admin API and runs f with the call timeout.
func (cf *ctlFlags) admin(cmd *cobra.Command, f func(context.Context, shardlimitv1.AdminClient) error) error {
	conn, err := cf.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
	defer cancel()
	return f(ctx, shardlimitv1.NewAdminClient(conn))
}

func printPlan(w io.Writer, p *shardlimitv1.PlanResponse) {
	fmt.Fprintf(w, "leader %s, shard map version %d, max/mean load %.2f → %.2f (threshold %.2f)\n", p.Leader, p.MapVersion, p.RatioBefore, p.RatioAfter, p.Threshold)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tREADY\tPARTITIONS\tLOAD/MIN BEFORE\tLOAD/MIN AFTER")
	for _, s := range p.Shards {
		fmt.Fprintf(tw, "%s\t%v\t%d → %d\t%d\t%d\n", s.Id, s.Ready, s.PartitionsBefore, s.PartitionsAfter, s.LoadBefore, s.LoadAfter)
	}
	_ = tw.Flush()
	if len(p.Moves) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tFROM\tTO\tLOAD/MIN")
		for _, m := range p.Moves {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\n", m.Partition, m.From, m.To, m.Load)
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(w, "%d moves: %s\n", len(p.Moves), p.Reason)
}

func printRun(w io.Writer, format string, r *shardlimitv1.RunRecord) error {
	if format == "json" {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "%s by %s: %d moves, max/mean %.2f → %.2f, %d counter keys handed over", r.Outcome, r.Leader, len(r.Moves), r.RatioBefore, r.RatioAfter, r.KeysMoved)
	if r.MapVersion > 0 {
		fmt.Fprintf(w, ", shard map version %d", r.MapVersion)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s", r.Error)
	}
	_, err := fmt.Fprintln(w)
	return err
}
