package robustness

import (
	"reflect"
	"testing"
	"time"
)

var testTopology = Topology{Shards: []string{"shard-1", "shard-2", "shard-3"}, Routers: []string{"router-1", "router-2"},
	Rules: []string{"public-gcra", "envoy-fixed_window"}}

// The same seed gives the same schedule; another seed another one.
func TestScheduleIsTheSeeds(t *testing.T) {
	a := Schedule(7, 10*time.Minute, testTopology, 0)
	if b := Schedule(7, 10*time.Minute, testTopology, 0); !reflect.DeepEqual(a, b) {
		t.Fatal("seed 7 gave two schedules")
	}
	if c := Schedule(8, 10*time.Minute, testTopology, 0); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
}

// A long schedule holds every kind of fault, every signal, and every
// component as a target; steps are within the schedule's length, with the
// documented gaps and lengths, and name real components.
func TestScheduleCoversEveryFault(t *testing.T) {
	length := 30 * time.Minute
	steps := Schedule(1, length, testTopology, 0)
	seen, signals, targets, aims := map[Kind]bool{}, map[string]bool{}, map[string]bool{}, map[Aim]int{}
	for k := range int(kinds) {
		seen[Kind(k)] = false
	}
	var at time.Duration
	known := map[string]bool{"etcd": true, "rebalance": true}
	for _, n := range append(append(testTopology.Shards, testTopology.Routers...), testTopology.Rules...) {
		known[n] = true
	}
	for _, s := range steps {
		at += s.After
		seen[s.Kind] = true
		if s.Kind == Signal {
			signals[s.Signal+" "+sortOf(s.Targets[0])] = true
			aims[s.Aim]++
		}
		if s.Aim != AimNone && (s.Signal == "sigterm" || sortOf(s.Targets[0]) != "shard" || s.Delay < 0 || s.Delay >= 2*time.Second) {
			t.Errorf("%s: aimed, but not a shard's SIGKILL or SIGSTOP 0..2 s into a hand-off", s.Name())
		}
		if s.Aim == AimTaker && (len(s.Targets) != 2 || s.Targets[0] == s.Targets[1] || sortOf(s.Targets[1]) != "shard") {
			t.Errorf("%s: a taker aimed at, with the giver %v", s.Name(), s.Targets[1:])
		}
		if s.Kind == Signal && s.Aim != AimTaker && len(s.Targets) != 1 {
			t.Errorf("%s: targets %v", s.Name(), s.Targets)
		}
		for _, x := range s.Targets {
			targets[x] = true
			if !known[x] {
				t.Errorf("%s: unknown target %q", s.Name(), x)
			}
		}
		if s.After < time.Second || s.After > 6*time.Second || s.For < 2*time.Second || s.For > 16*time.Second {
			t.Errorf("%s: after %v for %v, want 1..6 s and 2..16 s", s.Name(), s.After, s.For)
		}
		if (s.Kind == CutShardShard || s.Kind == OneWay) && (s.Targets[0] == s.Targets[1] || sortOf(s.Targets[0]) == "router" && sortOf(s.Targets[1]) == "router") {
			t.Errorf("%s: a link between components that do not talk", s.Name())
		}
	}
	if at >= length {
		t.Errorf("last step at %v, past the length %v", at, length)
	}
	for k, ok := range seen {
		if !ok {
			t.Errorf("no %s in %d steps", k, len(steps))
		}
	}
	for _, sig := range []string{"sigkill", "sigstop", "sigterm"} {
		for _, sort := range []string{"etcd", "shard", "router", "rebalance"} {
			if !signals[sig+" "+sort] {
				t.Errorf("no %s %s in %d steps", sig, sort, len(steps))
			}
		}
	}
	for x := range known {
		if !targets[x] {
			t.Errorf("%s never a target", x)
		}
	}
	if aims[AimGiver] == 0 || aims[AimTaker] == 0 {
		t.Errorf("signals aimed at a drain's giver %d times, at a taker %d times, in %d steps", aims[AimGiver], aims[AimTaker], len(steps))
	}
}

// The aims are drawn apart: a seed's steps are the ones it had before
// aims existed, but for the aims (seed 8, make robustness-split's, is
// still its split twice).
func TestAimsLeaveTheStepsAsTheyWere(t *testing.T) {
	steps := Schedule(8, 8*time.Second, testTopology, 0)
	if len(steps) != 2 || steps[0].Name() != "split [shard-2 router-2] | rest" || steps[0].After != 1415*time.Millisecond || steps[1].For != 13730*time.Millisecond {
		t.Fatalf("seed 8's first 8 s: %+v", steps)
	}
}

// Apart, each step starts the gap after the previous one's heal, and the
// seed's steps are Schedule's own, in order, but for their starts.
func TestScheduleApartHasOneFaultAtATime(t *testing.T) {
	gap := 5 * time.Second
	apart := Schedule(7, 10*time.Minute, testTopology, gap)
	dense := Schedule(7, 10*time.Minute, testTopology, 0)
	if len(apart) < 10 || len(apart) >= len(dense) {
		t.Fatalf("%d steps apart, %d dense", len(apart), len(dense))
	}
	for i, s := range apart {
		d := dense[i]
		d.After = s.After
		if !reflect.DeepEqual(s, d) {
			t.Fatalf("step %d: %+v apart, %+v dense", i, s, dense[i])
		}
		if i > 0 && s.After < apart[i-1].For+gap {
			t.Errorf("step %d (%s) starts %v after the previous one, which lasts %v", i, s.Name(), s.After, apart[i-1].For)
		}
	}
}
