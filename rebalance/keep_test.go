package rebalance

import (
	"fmt"
	"slices"
	"testing"

	"github.com/shardlimit/shardlimit/shard/handoff"
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// The map that a run publishes keeps each pair whose final copy failed
// with its source: its partitions stay as the map in force had them (left
// to the ring where there was no map), and their moves are left out; the
// pairs handed over move.
func TestPublishedMapKeepsFailedPairsWithTheirSources(t *testing.T) {
	a, c := member.Member{ID: "a"}, member.Member{ID: "c"}
	failed := []handoff.Pair{{From: a, To: c, Partitions: []uint32{1, 3}}}
	planned := func() *shardmap.Map {
		return &shardmap.Map{Partitions: 4, Owners: []string{"b", "c", "", "c"}, Moves: []shardmap.Move{
			{Partition: 0, From: "a", To: "b"}, {Partition: 1, From: "a", To: "c"}, {Partition: 3, From: "a", To: "c"},
		}}
	}
	for _, tc := range []struct {
		name string
		prev *shardmap.Map
		want []string
	}{
		{"a map in force", &shardmap.Map{Partitions: 4, Owners: []string{"", "a", "", ""}}, []string{"b", "a", "", ""}},
		{"no map yet", nil, []string{"b", "", "", ""}},
	} {
		next := planned()
		keep(next, tc.prev, failed)
		if !slices.Equal(next.Owners, tc.want) {
			t.Errorf("%s: owners %q, want %q", tc.name, next.Owners, tc.want)
		}
		if want := []shardmap.Move{{Partition: 0, From: "a", To: "b"}}; !slices.Equal(next.Moves, want) {
			t.Errorf("%s: moves %v, want %v", tc.name, next.Moves, want)
		}
	}
	next := planned()
	keep(next, nil, nil)
	if !slices.Equal(next.Owners, planned().Owners) || len(next.Moves) != 3 {
		t.Errorf("nothing failed: %q %v, want the plan", next.Owners, next.Moves)
	}
}

// A kept partition is set back as the map in force had it, not pinned to
// its pair's source: the two differ only when the ring changed during the
// run (a member's lease lost; the hand-off lock keeps joins and drains
// out), and then the owner in force as the map is published is the
// ring's, which already took the partition over from the source. Set back,
// the partition stays with that owner: the publish moves no partition
// whose counters did not move. Pinned to the source, the publish would
// move it back there (one more takeover), and pin it for good.
func TestKeptPartitionStaysWithTheOwnerInForceWhenAMemberLeftMidRun(t *testing.T) {
	cfg := shardmap.DefaultConfig()
	var ms []member.Member
	for i := range 6 {
		ms = append(ms, member.Member{ID: fmt.Sprintf("s%d", i), Addr: "x"})
	}
	atPlan, _ := shardmap.Build(cfg, ms)
	atPublish, _ := shardmap.Build(cfg, ms[:5]) // s5's lease was lost during the run
	prev := &shardmap.Map{Partitions: cfg.Partitions, Owners: make([]string, cfg.Partitions)}
	p := -1
	for q := range cfg.Partitions {
		was, _ := atPlan.Owner(q)
		is, _ := atPublish.Owner(q)
		if was.ID == "s0" && is.ID != "s0" {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("no partition of s0 that the ring moves when s5 leaves")
	}
	next := &shardmap.Map{Partitions: cfg.Partitions, Owners: slices.Clone(prev.Owners), Moves: []shardmap.Move{{Partition: p, From: "s0", To: "s1"}}}
	next.Owners[p] = "s1"
	keep(next, prev, []handoff.Pair{{From: ms[0], To: ms[1], Partitions: []uint32{uint32(p)}}})
	inForce, _ := shardmap.Resolve(atPublish, prev).Owner(p)
	published, _ := shardmap.Resolve(atPublish, next).Owner(p)
	if published.ID != inForce.ID || published.ID == "s0" {
		t.Fatalf("partition %d: in force %s as the map is published, %s once published; want it unmoved (not back to its source s0)", p, inForce.ID, published.ID)
	}
}
