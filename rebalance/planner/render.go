package planner

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// reason says in a sentence why planning stopped, from the final plan.
func (e ending) reason(p *Plan) string {
	var s string
	switch e.stop {
	case StopNoMembers:
		s = "no live members"
	case StopNoLoad:
		s = "no load on the live members: nothing to balance"
	case StopUnderThreshold:
		if len(p.Moves) == 0 {
			s = fmt.Sprintf("max/mean %.2f already at or under threshold %.2f", p.RatioAfter, p.Options.Threshold)
		} else {
			s = fmt.Sprintf("max/mean %.2f <= threshold %.2f after %s", p.RatioAfter, p.Options.Threshold, plural(len(p.Moves), "move"))
		}
	case StopMoveCap:
		if p.MaxAfter == p.MaxBefore {
			tied := 0
			for _, sh := range p.Shards {
				if sh.LoadBefore == p.MaxBefore {
					tied++
				}
			}
			s = fmt.Sprintf("move cap %d reached before max/mean went down (%d members tie at %d/min); the next run continues",
				p.Options.MaxMoves, tied, p.MaxBefore)
		} else {
			s = fmt.Sprintf("move cap %d reached with max/mean %.2f still over %.2f; the next run continues",
				p.Options.MaxMoves, p.RatioAfter, p.Options.Threshold)
		}
	case StopNoReadyTarget:
		if !e.anyReady {
			s = "no ready member to move partitions onto"
		} else {
			s = fmt.Sprintf("no ready member besides %s (hottest) to move partitions onto", e.ids[e.hot])
		}
		s += e.notReady("not ready")
	case StopGiantPartition:
		s = fmt.Sprintf("partition %d alone carries %d/min, more than the mean %.1f/min: "+
			"moving it would only make another shard as hot, so it stays on %s and max/mean cannot go under %.2f",
			e.giant, e.giantLoad, p.Mean, e.ids[e.hot], e.giantRatio)
	case StopNoImprovement:
		s = fmt.Sprintf("no move lowers max/mean: no partition of %s (hottest, %d/min) fits under it on %s (coolest ready, %d/min)",
			e.ids[e.hot], e.hotLoad, e.ids[e.cool], e.coolLoad)
		s += e.notReady("cooler but not ready")
	}
	if e.dropped > 0 {
		s += fmt.Sprintf("; dropped %s that did not lower max/mean", plural(e.dropped, "later move"))
	}
	return s
}

// notReady names the unready members of e after label, or returns "".
func (e ending) notReady(label string) string {
	if e.unready == 0 {
		return ""
	}
	s := "; " + label + ": " + strings.Join(e.names, ", ")
	if more := e.unready - len(e.names); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// String renders the plan as text for operators and the scenario tests:
// a summary, the moves and every live member's load before and after. It
// never contains a blank line.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan: %s; max/mean %.2f -> %.2f (max %d -> %d/min); threshold %.2f, max moves %d\n",
		plural(len(p.Moves), "move"), p.RatioBefore, p.RatioAfter, p.MaxBefore, p.MaxAfter,
		p.Options.Threshold, p.Options.MaxMoves)
	fmt.Fprintf(&b, "stop: %s: %s\n", p.Stop, p.Reason)
	fmt.Fprintf(&b, "load: %d/min on %s, mean %.1f/min\n", p.TotalLoad, plural(len(p.Shards), "live member"), p.Mean)
	if p.Outside > 0 {
		fmt.Fprintf(&b, "outside: %s with no live owner, %d/min, not counted\n", plural(p.Outside, "partition"), p.OutsideLoad)
	}
	if len(p.Moves) == 0 {
		b.WriteString("moves: none\n")
	} else {
		b.WriteString("moves:\n")
		w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
		fmt.Fprintln(w, "  partition\tfrom\tto\tload")
		for _, m := range p.Moves {
			fmt.Fprintf(w, "  %d\t%s\t%s\t%d\n", m.Partition, m.From, m.To, m.Load)
		}
		w.Flush()
	}
	if len(p.Shards) == 0 {
		b.WriteString("shards: none\n")
	} else {
		b.WriteString("shards:\n")
		w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
		fmt.Fprintln(w, "  member\tready\tpartitions\tbefore\tafter")
		for _, s := range p.Shards {
			ready := "no"
			if s.Ready {
				ready = "yes"
			}
			fmt.Fprintf(w, "  %s\t%s\t%d -> %d\t%d\t%d\n", s.ID, ready, s.PartitionsBefore, s.PartitionsAfter, s.LoadBefore, s.LoadAfter)
		}
		w.Flush()
	}
	return b.String()
}
