package handoff

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/partition"
)

// fakeShard records the pulls and drops a hand-off asks of it; a pull
// from a source in failFrom fails.
type fakeShard struct {
	shardlimitv1.ShardClient
	mu       *sync.Mutex // shared by every fake and the switch
	log      *[]string
	id       string
	failFrom map[string]bool
	empty    bool // the source holds no key of the partitions
}

func (f *fakeShard) Pull(_ context.Context, req *shardlimitv1.PullRequest, _ ...grpc.CallOption) (*shardlimitv1.PullResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kind := "pull"
	switch {
	case req.Final && req.Whole && !req.Journal && !req.Fence:
		kind = "final-whole"
	case req.Final && !req.Journal && !req.Fence:
		kind = "final"
	case req.Journal && !req.Final && !req.Fence:
		kind = "journal"
	}
	if req.HandoffId == 0 {
		kind += "-without-id" // the final copy could read an abandoned journal
	}
	*f.log = append(*f.log, kind+":"+req.SourceId+">"+f.id)
	if f.failFrom[req.SourceId] {
		return nil, errors.New("unreachable")
	}
	if f.empty {
		return &shardlimitv1.PullResponse{Chunks: 1}, nil
	}
	return &shardlimitv1.PullResponse{Keys: 10, Imported: 10, Chunks: 1}, nil
}

func (f *fakeShard) Drop(_ context.Context, _ *shardlimitv1.DropRequest, _ ...grpc.CallOption) (*shardlimitv1.DropResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.log = append(*f.log, "drop:"+f.id)
	return &shardlimitv1.DropResponse{}, nil
}

// Move copies (journaled), copies again (final: fenced and forwarding;
// whole for a pair whose first copy failed), switches, settles and drops
// in that order; a strict hand-off whose first copy failed never fences
// nor switches; a lenient one switches anyway and reports the pair; only
// pairs handed over are dropped.
func TestMoveOrdersTheStepsAndReportsFailures(t *testing.T) {
	ms := members(3)
	pairs := []Pair{{From: ms[0], To: ms[1], Partitions: []uint32{1, 2}}, {From: ms[2], To: ms[1], Partitions: []uint32{3}}}
	for _, tc := range []struct {
		name           string
		strict, drop   bool
		failFrom       string
		wantSwitched   bool
		wantErr        string
		wantLog        string
		wantNotHanded  int
		wantPartitions int
	}{
		{name: "all copied", strict: true, drop: true, wantSwitched: true,
			wantLog: "journal:shard-0>shard-1 journal:shard-2>shard-1 | final:shard-0>shard-1 final:shard-2>shard-1 | switch | drop:shard-0 drop:shard-2", wantPartitions: 3},
		{name: "strict, a source unreachable", strict: true, drop: true, failFrom: "shard-2",
			wantErr: "before switching, nothing switched: counters not handed over: shard-2 → shard-1 (1 partitions): unreachable",
			wantLog: "journal:shard-0>shard-1 journal:shard-2>shard-1", wantNotHanded: 1, wantPartitions: 3},
		{name: "lenient, a source unreachable", failFrom: "shard-2", drop: true, wantSwitched: true,
			wantErr: "after switching: counters not handed over: shard-2 → shard-1",
			wantLog: "journal:shard-0>shard-1 journal:shard-2>shard-1 | final-whole:shard-2>shard-1 final:shard-0>shard-1 | switch | drop:shard-0", wantNotHanded: 1, wantPartitions: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			var mu sync.Mutex
			shards := map[string]*fakeShard{}
			for _, m := range ms {
				shards[m.ID] = &fakeShard{mu: &mu, log: &log, id: m.ID, failFrom: map[string]bool{tc.failFrom: true}}
			}
			step := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
			o := Options{
				Partitions: 8, Settle: 1, Strict: tc.strict, Drop: tc.drop,
				Clients: func(m member.Member) (shardlimitv1.ShardClient, error) { return shards[m.ID], nil },
				OnStep:  func(partition.Phase) { step("|") },
			}
			rep, err := Move(context.Background(), o, pairs, func(context.Context) error { step("switch"); return nil })
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if got := phases(log); got != tc.wantLog {
				t.Fatalf("steps\n%q\nwant\n%q", got, tc.wantLog)
			}
			if rep.Switched != tc.wantSwitched || len(rep.NotHandedOver) != tc.wantNotHanded || rep.Partitions != tc.wantPartitions {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}

// With SkipEmptySettle, a hand-off with nothing to hand over (no key
// streamed) drops right after the switch, with no settle step; one that
// streamed a key settles first.
func TestMoveSkipsTheSettleOnlyWhenNothingMoved(t *testing.T) {
	ms := members(3)
	pairs := []Pair{{From: ms[0], To: ms[1], Partitions: []uint32{1, 2}}, {From: ms[2], To: ms[1], Partitions: []uint32{3}}}
	for _, tc := range []struct {
		name      string
		empty     bool
		wantSteps string
	}{
		{name: "nothing to hand over", empty: true, wantSteps: "copy copy again switch drop"},
		{name: "keys to hand over", wantSteps: "copy copy again switch settle drop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			var mu sync.Mutex
			shards := map[string]*fakeShard{}
			for _, m := range ms {
				shards[m.ID] = &fakeShard{mu: &mu, log: &log, id: m.ID, empty: tc.empty}
			}
			var steps []string
			o := Options{
				Partitions: 8, Settle: 1, Strict: true, Drop: true, SkipEmptySettle: true,
				Clients: func(m member.Member) (shardlimitv1.ShardClient, error) { return shards[m.ID], nil },
				OnStep:  func(s partition.Phase) { steps = append(steps, string(s)) },
			}
			rep, err := Move(context.Background(), o, pairs, func(context.Context) error { return nil })
			if err != nil || !rep.Switched {
				t.Fatalf("err %v, report %+v", err, rep)
			}
			if got := strings.Join(steps, " "); got != tc.wantSteps {
				t.Fatalf("steps %q, want %q", got, tc.wantSteps)
			}
			if got, want := phases(log), "drop:shard-0 drop:shard-2 final:shard-0>shard-1 final:shard-2>shard-1 journal:shard-0>shard-1 journal:shard-2>shard-1"; got != want { // sorted
				t.Fatalf("calls\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// phases renders the steps with each step's calls sorted (pairs copy in
// parallel); "|" starts a step.
func phases(steps []string) string {
	var out []string
	var run []string
	flush := func() {
		if len(run) > 0 {
			slices.Sort(run)
			out = append(out, strings.Join(run, " "))
		}
		run = nil
	}
	for _, s := range steps {
		if s == "|" {
			flush()
			continue
		}
		run = append(run, s)
	}
	flush()
	return strings.Join(out, " | ")
}
