package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
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
				return printOutput(cmd.OutOrStdout(), cf.output, p, func() error {
					printPlan(cmd.OutOrStdout(), p)
					return nil
				})
			})
		},
	}
	var wait bool
	apply := &cobra.Command{
		Use:   "apply [--wait]",
		Short: "Have the leader run now: move partitions, hand their counters over, publish a new shard map.",
		Long: `Have the leader run now: plan, copy the counters of moved partitions to
their new owners, copy again under a fence what changed meanwhile (the old
owners forward checks from then on), publish the new shard map, settle, drop.

The command waits as long as the run takes, up to --timeout: 10m unless
given, then prints the run's record. With --wait it shows the run as it
happens: a line as each phase starts and ends (plan; copy and copy again
with the keys each old owner → new owner pair handed over; publish with
the version; settle; drop), then the record, then waits until the router
routes by the new map. With -o json or -o yaml, --wait prints one document
per event (kind: asked, started, phase_started, pair_copied, phase_ended,
finished with the final record, routed); YAML documents are separated by
---.

If the deadline passes first, it says which phase the run was in and what
it had done (without --wait: what the leader's run records show); the run
goes on at the leader, and ` + "`rebalance watch`" + ` follows it. A run that fails or
is skipped exits 4, saying in which phase and why.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.run(cmd, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "ctl"}, Wait: wait})
		},
	}
	apply.Flags().BoolVar(&wait, "wait", false, "show each phase as it happens, and wait until the router routes by the new shard map")
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
				return printOutput(cmd.OutOrStdout(), cf.output, resp, func() error {
					tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "STARTED\tTRIGGER\tLEADER\tOUTCOME\tMOVES\tMAX/MEAN\tVERSION\tKEYS MOVED\tERROR")
					for _, r := range resp.Runs {
						outcome := r.Outcome
						if n := len(r.Phases); outcome == runstore.Running && n > 0 {
							outcome += ": " + r.Phases[n-1].Name // the phase it is in
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.2f → %.2f\t%d\t%d\t%s\n", time.Unix(0, r.StartedUnixNs).Format(time.DateTime),
							r.Trigger, r.Leader, outcome, len(r.Moves), r.RatioBefore, r.RatioAfter, r.MapVersion, r.KeysMoved, r.Error)
					}
					return tw.Flush()
				})
			})
		},
	}
	runs.Flags().Uint32Var(&limit, "limit", 20, "how many runs")
	var started int64
	watch := &cobra.Command{
		Use:   "watch [--run STARTED_UNIX_NS]",
		Short: "Follow a run as it happens (the newest unless --run names one), as apply --wait shows it; starts nothing.",
		Long: `Follow a run as it happens, the newest unless --run names one (its
started_unix_ns, as ` + "`rebalance runs -o json`" + ` lists it), as apply --wait
shows it: a line as each phase starts and ends, then the record; with -o
json or -o yaml one document per event. A run that already ended is shown
at once. It waits up to --timeout (10m unless given); a run that failed or
was skipped exits 4.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if started < 0 {
				return usageErrorf("--run: %d is negative", started)
			}
			return cf.stream(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (runEvents, error) {
				return c.WatchRebalanceRun(ctx, &shardlimitv1.WatchRebalanceRunRequest{StartedUnixNs: started})
			}, func() string { return "the run's record did not show" })
		},
	}
	watch.Flags().Int64Var(&started, "run", 0, "the run's started_unix_ns; 0: the newest run")
	cmd.AddCommand(plan, apply, runs, watch)
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
				return printOutput(cmd.OutOrStdout(), cf.output, resp, func() error {
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
			})
		},
	}
	var to int64
	rollback := &cobra.Command{
		Use:   "rollback --to VERSION",
		Short: "Publish a kept version's pins again, handing counters over like a run, showing each phase (waits up to --timeout, 10m unless given).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to < 1 {
				return usageErrorf("--to: %d is not a version (1 or more)", to)
			}
			return cf.run(cmd, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "ctl rollback", RollbackTo: to}, Wait: true})
		},
	}
	rollback.Flags().Int64Var(&to, "to", 0, "version to roll back to (required)")
	_ = rollback.MarkFlagRequired("to")
	cmd.AddCommand(history, rollback)
	return cmd
}

// runTimeout bounds a command that waits for a rebalance run: --timeout
// (or SHARDLIMIT_TIMEOUT) when given, else 10 minutes, since a run copies
// counters and settles before it answers.
func (cf *ctlFlags) runTimeout(cmd *cobra.Command) time.Duration {
	if cmd.Flags().Changed("timeout") {
		return cf.timeout
	}
	return 10 * time.Minute
}

// run has the leader run and waits for the answer as long as the run
// takes, up to runTimeout; with Wait, it follows the run's phases. When
// the deadline passes first, the error says what the run records show of
// the run.
func (cf *ctlFlags) run(cmd *cobra.Command, req *shardlimitv1.RebalanceRunRequest) error {
	if req.Wait {
		return cf.follow(cmd, req)
	}
	timeout := cf.runTimeout(cmd)
	started := time.Now()
	var resp *shardlimitv1.RunResponse
	err := cf.call(cmd, timeout, func(ctx context.Context, conn *grpc.ClientConn) (err error) {
		resp, err = shardlimitv1.NewAdminClient(conn).RebalanceRun(ctx, req)
		return err
	})
	if err == nil {
		if err := printRun(cmd.OutOrStdout(), cf.output, resp.Run); err != nil {
			return err
		}
		return runFailed(resp.Run)
	}
	if status.Code(err) != codes.DeadlineExceeded || cmd.Context().Err() != nil {
		return err
	}
	return withCode(exitTimeout, fmt.Errorf("no answer within %v (--timeout): %s", timeout, cf.runAfter(cmd, req.Run.Trigger, started)))
}

// runAfter says what the newest run record of a trigger since started shows.
func (cf *ctlFlags) runAfter(cmd *cobra.Command, trigger string, started time.Time) string {
	var resp *shardlimitv1.RebalanceRunsResponse
	err := cf.call(cmd, 5*time.Second, func(ctx context.Context, conn *grpc.ClientConn) (err error) {
		resp, err = shardlimitv1.NewAdminClient(conn).RebalanceRuns(ctx, &shardlimitv1.RebalanceRunsRequest{Limit: 10})
		return err
	})
	if err != nil {
		return fmt.Sprintf("the run records cannot be read either (%v); see `shardlimit ctl rebalance runs` later", err)
	}
	for _, r := range resp.Runs { // newest first
		if r.Trigger != trigger || r.StartedUnixNs < started.Add(-time.Second).UnixNano() {
			continue
		}
		what := fmt.Sprintf("the run the leader %s started at %s ended %s", r.Leader, time.Unix(0, r.StartedUnixNs).Format(time.TimeOnly), r.Outcome)
		if r.MapVersion > 0 {
			what += fmt.Sprintf(", published shard map version %d (this router may not route by it yet)", r.MapVersion)
		}
		if r.Error != "" {
			what += ": " + r.Error
		}
		return what
	}
	return "no run record since the call: the leader's run was still going (the call's end may have cancelled it) or never started; see `shardlimit ctl rebalance runs`"
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
	fmt.Fprintf(w, "%s: %s\n", plural(len(p.Moves), "move"), p.Reason)
}

func printRun(w io.Writer, format string, r *shardlimitv1.RunRecord) error {
	if format != "text" {
		return printOutput(w, format, r, nil)
	}
	fmt.Fprintf(w, "%s by %s: %s, max/mean %.2f → %.2f, %s handed over", r.Outcome, r.Leader, plural(len(r.Moves), "move"), r.RatioBefore, r.RatioAfter, plural(r.KeysMoved, "counter key"))
	if r.MapVersion > 0 {
		fmt.Fprintf(w, ", shard map version %d", r.MapVersion)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s", r.Error)
	}
	_, err := fmt.Fprintln(w)
	return err
}
