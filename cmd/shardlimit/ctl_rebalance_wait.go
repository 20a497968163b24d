package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
)

// follow has the leader run and prints the run's events as they come
// (RebalanceRunStream): in text, a line as each phase starts and ends, one
// per pair copied, then the final record; in JSON or YAML, one document
// per event. It waits as long as the run takes, up to runTimeout; when the
// deadline passes first, the error says which phase the run was in and
// what it had done.
func (cf *ctlFlags) follow(cmd *cobra.Command, req *shardlimitv1.RebalanceRunRequest) error {
	started := time.Now()
	return cf.stream(cmd, func(ctx context.Context, c shardlimitv1.AdminClient) (runEvents, error) {
		return c.RebalanceRunStream(ctx, req)
	}, func() string { return cf.runAfter(cmd, req.Run.Trigger, started) })
}

// runEvents is the client side of RebalanceRunStream and WatchRebalanceRun.
type runEvents = grpc.ServerStreamingClient[shardlimitv1.RebalanceRunEvent]

// stream prints the events of the stream open opens until it ends, up to
// runTimeout; when the deadline passes before the run's record showed,
// the error says what unseen says.
func (cf *ctlFlags) stream(cmd *cobra.Command, open func(context.Context, shardlimitv1.AdminClient) (runEvents, error), unseen func() string) error {
	timeout := cf.runTimeout(cmd)
	p := &runPrinter{w: cmd.OutOrStdout(), format: cf.output}
	err := cf.call(cmd, timeout, func(ctx context.Context, conn *grpc.ClientConn) error {
		s, err := open(ctx, shardlimitv1.NewAdminClient(conn))
		if err != nil {
			return err
		}
		for {
			ev, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := p.print(ev); err != nil {
				return err
			}
		}
	})
	switch {
	case err == nil && p.final == nil:
		return withCode(exitFailed, errors.New("the router ended the stream before the run ended"))
	case err == nil:
		return runFailed(p.final)
	case status.Code(err) != codes.DeadlineExceeded || cmd.Context().Err() != nil:
		return err
	case p.run == nil:
		return withCode(exitTimeout, fmt.Errorf("no answer within %v (--timeout): %s", timeout, unseen()))
	}
	return withCode(exitTimeout, fmt.Errorf("no end within %v (--timeout): %s", timeout, p.where()))
}

// runFailed returns an error with exitFailed for a run that failed or was
// skipped, saying in which phase and why (the record's error does).
func runFailed(r *shardlimitv1.RunRecord) error {
	switch r.Outcome {
	case "failed", "skipped":
		return withCode(exitFailed, fmt.Errorf("the run %s: %s", r.Outcome, r.Error))
	}
	return nil
}

// runPrinter prints a run's events and remembers where the run is.
type runPrinter struct {
	w      io.Writer
	format string
	docs   int
	// run is the record as the stream showed it (nil before started);
	// final the record once finished.
	run, final *shardlimitv1.RunRecord
	// phases ended, and the one that goes on (nil between phases).
	ended   []*shardlimitv1.RunPhase
	current *shardlimitv1.RunPhase
}

func (p *runPrinter) print(ev *shardlimitv1.RebalanceRunEvent) error {
	p.follow(ev)
	if p.format != "text" {
		if p.format == "yaml" && p.docs > 0 {
			fmt.Fprintln(p.w, "---")
		}
		p.docs++
		return printOutput(p.w, p.format, ev, nil)
	}
	at := time.Unix(0, ev.UnixNs).Format("15:04:05.000")
	var err error
	switch ev.Kind {
	case runstore.EventAsked:
		_, err = fmt.Fprintf(p.w, "%s asked the rebalance leader %s to run\n", at, ev.Leader)
	case runstore.EventStarted:
		_, err = fmt.Fprintf(p.w, "%s run started by %s (trigger %s)\n", at, ev.Run.Leader, ev.Run.Trigger)
	case runstore.EventPhaseStarted:
		_, err = fmt.Fprintf(p.w, "%s %s started\n", at, ev.Phase.Name)
	case runstore.EventPairCopied:
		pc := ev.Pair
		_, err = fmt.Fprintf(p.w, "             %s: %s → %s, %s, %s (%d imported)%s\n",
			ev.Phase.Name, pc.From, pc.To, plural(pc.Partitions, "partition"), plural(pc.Keys, "key"), pc.Imported, failedSuffix(pc.Error))
	case runstore.EventPhaseEnded:
		_, err = fmt.Fprintf(p.w, "%s %s\n", at, phaseSummary(ev.Phase))
	case runstore.EventFinished:
		fmt.Fprintf(p.w, "%s ", at)
		err = printRun(p.w, "text", ev.Run)
	case runstore.EventRouted:
		_, err = fmt.Fprintf(p.w, "%s the router routes by shard map version %d\n", at, ev.RoutingVersion)
	}
	return err
}

// follow updates where the run is.
func (p *runPrinter) follow(ev *shardlimitv1.RebalanceRunEvent) {
	switch ev.Kind {
	case runstore.EventStarted:
		p.run = ev.Run
	case runstore.EventPhaseStarted:
		p.current = ev.Phase
	case runstore.EventPairCopied:
		if p.current != nil {
			p.current.Pairs = append(p.current.Pairs, ev.Pair)
			p.current.Keys += ev.Pair.Keys
		}
	case runstore.EventPhaseEnded:
		p.ended, p.current = append(p.ended, ev.Phase), nil
	case runstore.EventFinished:
		p.run, p.final = ev.Run, ev.Run
	}
}

// phaseSummary says how a phase ended: how long it took, what it did, and
// why it failed.
func phaseSummary(ph *shardlimitv1.RunPhase) string {
	var b strings.Builder
	verb := "ended"
	if ph.Error != "" {
		verb = "failed"
	}
	took := time.Duration(ph.FinishedUnixNs - ph.StartedUnixNs)
	if took >= time.Millisecond {
		took = took.Round(time.Millisecond)
	} else {
		took = took.Round(time.Microsecond)
	}
	fmt.Fprintf(&b, "%s %s (%v)", ph.Name, verb, took)
	if ph.Name == "copy" || ph.Name == "copy again" {
		fmt.Fprintf(&b, ": %s (%d imported) over %s", plural(ph.Keys, "key"), ph.Imported, plural(len(ph.Pairs), "old → new owner pair"))
	}
	if ph.Detail != "" {
		fmt.Fprintf(&b, ": %s", ph.Detail)
	}
	if ph.Error != "" {
		fmt.Fprintf(&b, ": %s", ph.Error)
	}
	return b.String()
}

func failedSuffix(err string) string {
	if err == "" {
		return ""
	}
	return ", failed: " + err
}

// where says where the run was when the stream ended early: its phase
// and what it had done.
func (p *runPrinter) where() string {
	if p.final != nil {
		what := fmt.Sprintf("the run ended %s", p.final.Outcome)
		if p.final.MapVersion > 0 {
			what += fmt.Sprintf(" and published shard map version %d, but this router does not route by it yet", p.final.MapVersion)
		}
		return what
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the run that %s started at %s ", p.run.Leader, time.Unix(0, p.run.StartedUnixNs).Format(time.TimeOnly))
	if ph := p.current; ph != nil {
		fmt.Fprintf(&b, "was in phase %s (since %s", ph.Name, time.Unix(0, ph.StartedUnixNs).Format(time.TimeOnly))
		if ph.Name == "copy" || ph.Name == "copy again" {
			fmt.Fprintf(&b, "; %s so far, from the %s copied", plural(ph.Keys, "key"), plural(len(ph.Pairs), "old → new owner pair"))
		}
		b.WriteString(")")
	} else {
		b.WriteString("was between phases")
	}
	if len(p.ended) > 0 {
		done := make([]string, len(p.ended))
		for i, ph := range p.ended {
			done[i] = phaseSummary(ph)
		}
		fmt.Fprintf(&b, "; done before: %s", strings.Join(done, "; "))
	}
	fmt.Fprintf(&b, ". The run goes on at the leader: `shardlimit ctl rebalance watch --run %d` follows it", p.run.StartedUnixNs)
	return b.String()
}
