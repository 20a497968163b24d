package rebalance

import (
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
