package runstore

import (
	"google.golang.org/protobuf/proto"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// The kinds of RebalanceRunEvent.
const (
	EventAsked        = "asked"
	EventStarted      = "started"
	EventPhaseStarted = "phase_started"
	EventPairCopied   = "pair_copied"
	EventPhaseEnded   = "phase_ended"
	EventFinished     = "finished"
	EventRouted       = "routed"
)

// Events returns what changed from prev to next, two records of one run
// (prev nil before the first), as events in the order they happened:
// started, then per phase phase_started, pair_copied for each pair whose
// copy ended, phase_ended, and finished when the run ended. Records are
// written at most a few times a second, so one write may carry several
// events; none is lost.
func Events(prev, next *shardlimitv1.RunRecord) []*shardlimitv1.RebalanceRunEvent {
	var out []*shardlimitv1.RebalanceRunEvent
	if prev == nil {
		prev = &shardlimitv1.RunRecord{}
		started := proto.CloneOf(next)
		started.Phases, started.Outcome = nil, Running
		started.FinishedUnixNs = 0
		out = append(out, &shardlimitv1.RebalanceRunEvent{Kind: EventStarted, Run: started, UnixNs: next.StartedUnixNs})
	}
	for i, ph := range next.Phases {
		var was *shardlimitv1.RunPhase
		if i < len(prev.Phases) {
			was = prev.Phases[i]
		}
		if was == nil {
			out = append(out, &shardlimitv1.RebalanceRunEvent{Kind: EventPhaseStarted, UnixNs: ph.StartedUnixNs,
				Phase: &shardlimitv1.RunPhase{Name: ph.Name, StartedUnixNs: ph.StartedUnixNs}})
			was = &shardlimitv1.RunPhase{}
		}
		for _, pc := range ph.Pairs[min(len(was.Pairs), len(ph.Pairs)):] {
			out = append(out, &shardlimitv1.RebalanceRunEvent{Kind: EventPairCopied, Pair: pc,
				Phase: &shardlimitv1.RunPhase{Name: ph.Name, StartedUnixNs: ph.StartedUnixNs}})
		}
		if ph.FinishedUnixNs != 0 && was.FinishedUnixNs == 0 {
			out = append(out, &shardlimitv1.RebalanceRunEvent{Kind: EventPhaseEnded, Phase: ph, UnixNs: ph.FinishedUnixNs})
		}
	}
	if Finished(next) && !Finished(prev) {
		out = append(out, &shardlimitv1.RebalanceRunEvent{Kind: EventFinished, Run: next, UnixNs: next.FinishedUnixNs})
	}
	return out
}

// Finished reports whether a record's run ended.
func Finished(r *shardlimitv1.RunRecord) bool { return r.Outcome != Running && r.Outcome != "" }
