package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

func ctlLimitedCmd(cf *ctlFlags) *cobra.Command {
	var service string
	var since, until time.Duration
	var limit uint32
	cmd := &cobra.Command{
		Use:   "limited --service S [--since 1h]",
		Short: "Which users of a service were limited, when it began and ended, how often they were denied.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since < 0 || until < 0 {
				return fmt.Errorf("since, until: durations back from now must not be negative")
			}
			now := time.Now()
			req := &shardlimitv1.ListLimitedRequest{Service: service, Limit: limit, SinceUnixNs: now.Add(-since).UnixNano()}
			if until > 0 {
				req.UntilUnixNs = now.Add(-until).UnixNano()
			}
			return cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
				resp, err := c.ListLimited(ctx, req)
				if err != nil {
					return err
				}
				return printOutput(cmd.OutOrStdout(), cf.output, resp, func() error {
					printEpisodes(cmd.OutOrStdout(), resp, now)
					return nil
				})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&service, "service", "", "service (required)")
	f.DurationVar(&since, "since", time.Hour, "episodes that overlap the time since this long ago")
	f.DurationVar(&until, "until", 0, "and until this long ago (default: now)")
	f.Uint32Var(&limit, "limit", 100, "most episodes, newest first")
	_ = cmd.MarkFlagRequired("service")
	return cmd
}

func printEpisodes(w io.Writer, resp *shardlimitv1.ListLimitedResponse, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tENDPOINT\tRULE\tBEGAN\tENDED\tLASTED\tDENIED")
	for _, e := range resp.Episodes {
		began := time.Unix(0, e.BeganUnixNs)
		ended, lasted := "still limited", now.Sub(began)
		if e.EndedUnixNs != 0 {
			ended = time.Unix(0, e.EndedUnixNs).Format(time.TimeOnly)
			lasted = time.Duration(e.EndedUnixNs - e.BeganUnixNs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%d\n", e.User, e.Endpoint, e.Rule, began.Format(time.DateTime), ended, lasted.Round(time.Second), e.Denied)
	}
	_ = tw.Flush()
	if len(resp.Episodes) == 0 {
		fmt.Fprintln(w, "no user was limited in that time")
	}
	if len(resp.Unreachable) > 0 {
		fmt.Fprintf(w, "not answered by shards %v: their episodes are missing\n", resp.Unreachable)
	}
}

func ctlTopCmd(cf *ctlFlags) *cobra.Command {
	var every time.Duration
	var once bool
	var keys int
	cmd := &cobra.Command{
		Use:   "top",
		Short: "The hottest shards and keys, refreshing (--once, -o json and -o yaml print one snapshot).",
		Long: `The hottest shards and keys, refreshing every --every.

On a terminal each snapshot replaces the last; when standard output is not
a terminal (a pipe, a file) no escape codes are written and the snapshots
follow each other, separated by a blank line. --once, -o json and -o yaml
print one snapshot (as 'ctl members -o json|yaml' prints it, each shard's
partition loads summarised).

Hot-key counts cover one to two of the shards' --top-keys-period. They are
exact (± 0) while each of those periods stayed under the shard's
--top-keys-exact decisions; past that, or when a shard sees more keys than
its memory for them holds, a count is an estimate, marked ~, and ± bounds
its error: the bounded memory's overestimate plus the sampling error at
three standard deviations (about 99.7%).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < 100*time.Millisecond {
				return usageErrorf("--every: %v is under the minimum of 100ms", every)
			}
			if keys < 0 {
				return usageErrorf("--keys: %d is negative", keys)
			}
			if cf.output != "text" {
				once = true
			}
			w := cmd.OutOrStdout()
			tty := isTerminal(w)
			for n := 0; ; n++ {
				err := cf.admin(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) error {
					resp, err := c.ListMembers(ctx, &shardlimitv1.ListMembersRequest{})
					if err != nil {
						return err
					}
					return printOutput(w, cf.output, membersView(resp, false), func() error {
						switch {
						case tty && !once:
							fmt.Fprint(w, "\x1b[H\x1b[2J") // clear the terminal
						case n > 0:
							fmt.Fprintln(w)
						}
						printTop(w, resp, keys)
						return nil
					})
				})
				if err != nil || once {
					return err
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	f := cmd.Flags()
	f.DurationVar(&every, "every", 2*time.Second, "refresh interval")
	f.BoolVar(&once, "once", false, "print one snapshot and exit")
	f.IntVar(&keys, "keys", 10, "hottest keys to show")
	return cmd
}

// isTerminal reports whether w is a terminal, where escape codes may be
// written.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func printTop(w io.Writer, resp *shardlimitv1.ListMembersResponse, keys int) {
	type shardLoad struct {
		id   string
		load uint64
		m    *shardlimitv1.Member
	}
	var shards []shardLoad
	var total uint64
	type hot struct {
		shard string
		k     *shardlimitv1.HotKey
	}
	var hots []hot
	for _, m := range resp.Members {
		sl := shardLoad{id: m.Id, m: m}
		if m.Stats != nil {
			sl.load = m.Stats.Load
			for _, k := range m.Stats.HotKeys {
				hots = append(hots, hot{m.Id, k})
			}
		}
		total += sl.load
		shards = append(shards, sl)
	}
	slices.SortFunc(shards, func(a, b shardLoad) int { return int(b.load) - int(a.load) })
	mean := 0.0
	if len(shards) > 0 {
		mean = float64(total) / float64(len(shards))
	}
	fmt.Fprintf(w, "shardlimit top — %s — %s, %s in the last minute\n\n", time.Now().Format(time.TimeOnly), plural(len(shards), "shard"), plural(total, "decision"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tLOAD/MIN\tx MEAN\tPARTITIONS\tKEYS\tEVICTIONS")
	for _, s := range shards {
		ratio := 0.0
		if mean > 0 {
			ratio = float64(s.load) / mean
		}
		keysHeld, ev := "?", "?"
		if st := s.m.Stats; st != nil {
			keysHeld, ev = fmt.Sprint(st.Keys), fmt.Sprint(st.Evictions)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%d\t%s\t%s\n", s.id, s.load, ratio, s.m.Partitions, keysHeld, ev)
	}
	_ = tw.Flush()
	slices.SortFunc(hots, func(a, b hot) int { return cmp.Compare(b.k.Count, a.k.Count) })
	if len(hots) > keys {
		hots = hots[:keys]
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tRULE\tUSER\tDECISIONS\t±\tSHARD")
	estimates := false
	for _, h := range hots {
		count, exact := fmt.Sprint(h.k.Count), h.k.Error == 0 && !h.k.Sampled
		if !exact {
			count, estimates = "~"+count, true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", h.k.Service, h.k.Rule, h.k.User, count, h.k.Error+h.k.SamplingError, h.shard)
	}
	_ = tw.Flush()
	switch {
	case estimates:
		fmt.Fprintln(w, "\n~ estimate: the true count is within ± (a shard's bounded memory, and past --top-keys-exact\ndecisions a period its sampling, at 99.7%); the others are exact.")
	case len(hots) > 0:
		fmt.Fprintln(w, "\nevery count is exact.")
	}
}
