package runstore

import (
	"slices"
	"testing"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// Successive records of one run become the events between them, none lost
// when one write carries several changes, none repeated.
func TestEvents(t *testing.T) {
	plan := func(end int64) *shardlimitv1.RunPhase {
		return &shardlimitv1.RunPhase{Name: "plan", StartedUnixNs: 1, FinishedUnixNs: end}
	}
	copying := func(end int64, pairs int) *shardlimitv1.RunPhase {
		ph := &shardlimitv1.RunPhase{Name: "copy", StartedUnixNs: 2, FinishedUnixNs: end}
		for range pairs {
			ph.Pairs = append(ph.Pairs, &shardlimitv1.PairCopy{From: "a", To: "b", Keys: 5})
		}
		return ph
	}
	rec := func(outcome string, phases ...*shardlimitv1.RunPhase) *shardlimitv1.RunRecord {
		return &shardlimitv1.RunRecord{StartedUnixNs: 1, Outcome: outcome, Phases: phases}
	}
	for _, tc := range []struct {
		name       string
		prev, next *shardlimitv1.RunRecord
		want       []string
	}{
		{"first record", nil, rec(Running, plan(0)), []string{"started", "phase_started plan"}},
		{"no change", rec(Running, plan(0)), rec(Running, plan(0)), nil},
		{"phase ends, next starts, a pair copied", rec(Running, plan(0)), rec(Running, plan(2), copying(0, 1)),
			[]string{"phase_ended plan", "phase_started copy", "pair_copied copy"}},
		{"more pairs, phase ends", rec(Running, plan(2), copying(0, 1)), rec(Running, plan(2), copying(3, 3)),
			[]string{"pair_copied copy", "pair_copied copy", "phase_ended copy"}},
		{"first seen finished", nil, rec("balanced", plan(2)), []string{"started", "phase_started plan", "phase_ended plan", "finished"}},
		{"finishes", rec(Running, plan(2)), rec("failed", plan(2)), []string{"finished"}},
		{"finished again", rec("failed", plan(2)), rec("failed", plan(2)), nil},
	} {
		var got []string
		for _, ev := range Events(tc.prev, tc.next) {
			s := ev.Kind
			if ev.Phase != nil {
				s += " " + ev.Phase.Name
			}
			got = append(got, s)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The started event shows the run as it started, even when its first
// record seen is later.
func TestStartedEventIsRunning(t *testing.T) {
	next := &shardlimitv1.RunRecord{StartedUnixNs: 1, FinishedUnixNs: 9, Outcome: "moved", Phases: []*shardlimitv1.RunPhase{{Name: "plan"}}}
	ev := Events(nil, next)[0]
	if ev.Kind != EventStarted || ev.Run.Outcome != Running || ev.Run.FinishedUnixNs != 0 || len(ev.Run.Phases) != 0 || next.Outcome != "moved" {
		t.Fatalf("started: %v; record: %v", ev, next)
	}
}
