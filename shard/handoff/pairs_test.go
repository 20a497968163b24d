package handoff

import (
	"fmt"
	"testing"

	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

func members(n int) []member.Member {
	out := make([]member.Member, n)
	for i := range out {
		out[i] = member.Member{ID: fmt.Sprintf("shard-%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i)}
	}
	return out
}

// Pairs are exactly the partitions whose owner changes, grouped by (from,
// to): a drain sends each of the leaver's partitions to its next owner, a
// join brings each gained partition from its owner, and a partition with
// no owner on one side is left out.
func TestPairsAreTheChangedOwners(t *testing.T) {
	cfg := shardmap.Config{Partitions: 64, ReplicationFactor: 20, Load: 1.25}
	ms := members(3)
	three, _ := shardmap.InForce(cfg, ms, nil)
	draining := append(ms[:2:2], member.Member{ID: "shard-2", Addr: ms[2].Addr, State: member.Draining})
	two, _ := shardmap.InForce(cfg, draining, nil)

	check := func(name string, before, after *shardmap.Table, wantFrom, wantTo string) {
		t.Helper()
		pairs := Pairs(before, after)
		moved := map[uint32]bool{}
		for i, p := range pairs {
			if i > 0 && (pairs[i-1].From.ID > p.From.ID || (pairs[i-1].From.ID == p.From.ID && pairs[i-1].To.ID >= p.To.ID)) {
				t.Fatalf("%s: pairs not sorted by (from, to): %v", name, pairs)
			}
			if (wantFrom != "" && p.From.ID != wantFrom) || (wantTo != "" && p.To.ID != wantTo) || p.From.ID == p.To.ID {
				t.Fatalf("%s: pair %s → %s", name, p.From.ID, p.To.ID)
			}
			for _, part := range p.Partitions {
				a, _ := before.Owner(int(part))
				b, _ := after.Owner(int(part))
				if a.ID != p.From.ID || b.ID != p.To.ID {
					t.Fatalf("%s: partition %d in pair %s → %s, owners %s → %s", name, part, p.From.ID, p.To.ID, a.ID, b.ID)
				}
				moved[part] = true
			}
		}
		for p := range 64 {
			a, _ := before.Owner(p)
			b, _ := after.Owner(p)
			if (a.ID != b.ID) != moved[uint32(p)] {
				t.Fatalf("%s: partition %d (%s → %s) moved=%v", name, p, a.ID, b.ID, moved[uint32(p)])
			}
		}
		if len(moved) != Partitions(pairs) {
			t.Fatalf("%s: Partitions = %d, want %d", name, Partitions(pairs), len(moved))
		}
		t.Logf("%s: %d partitions in %d pairs", name, len(moved), len(pairs))
	}
	check("drain of shard-2", three, two, "shard-2", "")
	check("join of shard-2", two, three, "", "shard-2")

	none, _ := shardmap.InForce(cfg, nil, nil)
	if p := Pairs(none, three); len(p) != 0 {
		t.Fatalf("first member: %d pairs, want none (nothing to copy)", len(p))
	}
	if p := Pairs(three, none); len(p) != 0 {
		t.Fatalf("last member leaving: %d pairs, want none (nowhere to go)", len(p))
	}
}
