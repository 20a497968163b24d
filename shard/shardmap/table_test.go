package shardmap

import (
	"fmt"
	"testing"

	"github.com/shardlimit/shardlimit/shard/member"
)

func members(n int) []member.Member {
	out := make([]member.Member, n)
	for i := range out {
		out[i] = member.Member{ID: fmt.Sprintf("shard-%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i)}
	}
	return out
}

func TestBuildIsDeterministicAndBounded(t *testing.T) {
	cfg := DefaultConfig()
	ms := members(5)
	a, err := Build(cfg, ms)
	if err != nil {
		t.Fatal(err)
	}
	reversed := []member.Member{ms[4], ms[3], ms[2], ms[1], ms[0]}
	b, _ := Build(cfg, reversed)
	for p := range cfg.Partitions {
		x, _ := a.Owner(p)
		y, _ := b.Owner(p)
		if x.ID != y.ID {
			t.Fatalf("partition %d: %s vs %s depending on member order", p, x.ID, y.ID)
		}
	}
	limit := int(float64(cfg.Partitions/5)*cfg.Load) + 1
	for id, n := range a.Count() {
		if n == 0 || n > limit {
			t.Errorf("%s owns %d partitions, want 1..%d", id, n, limit)
		}
	}
}

func TestRemovingOneMemberMovesOnlyItsShareAndALittle(t *testing.T) {
	cfg := DefaultConfig()
	ms := members(16)
	before, _ := Build(cfg, ms)
	after, _ := Build(cfg, ms[1:])
	moved := 0
	for p := range cfg.Partitions {
		x, _ := before.Owner(p)
		y, _ := after.Owner(p)
		if x.ID != y.ID {
			moved++
		}
	}
	// The removed member's own share must move; bounded load moves a few more.
	share := before.Count()[ms[0].ID]
	if moved < share || moved > 3*share {
		t.Fatalf("moved %d partitions; the removed member owned %d", moved, share)
	}
	t.Logf("moved %d of %d partitions (removed member owned %d)", moved, cfg.Partitions, share)
}

func TestNoMembersAndMoreMembersThanPartitions(t *testing.T) {
	empty, err := Build(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := empty.Owner(0); ok {
		t.Fatal("owner with no members")
	}
	cfg := Config{Partitions: 4, ReplicationFactor: 10, Load: 1.25}
	tbl, err := Build(cfg, members(10))
	if err != nil {
		t.Fatal(err)
	}
	for p := range 4 {
		if _, ok := tbl.Owner(p); !ok {
			t.Fatalf("partition %d has no owner", p)
		}
	}
}

func TestConfigValidateNamesField(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Load = 1
	if _, err := Build(cfg, members(1)); err == nil || err.Error()[:4] != "load" {
		t.Fatalf("got %v, want an error naming load", err)
	}
}

// build is the table of ms over 16 partitions.
func build(t *testing.T, ms []member.Member) *Table {
	t.Helper()
	tb, err := Build(Config{Partitions: 16, ReplicationFactor: 20, Load: 1.25}, ms)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// Ownerless is what the next table gives a member that the previous one
// gave nobody: all of it after a table with no member, none otherwise.
func TestOwnerless(t *testing.T) {
	ms := members(2)
	none, both := build(t, nil), build(t, ms)
	id := ms[0].ID
	if got, want := len(Ownerless(none, both, id)), len(both.PartitionsOf(id)); got != want || want == 0 {
		t.Fatalf("after no member: %d ownerless, want all %d of %s's", got, want, id)
	}
	if got := Ownerless(both, both, id); got != nil {
		t.Fatalf("after a table naming owners: %v ownerless, want none", got)
	}
}

func TestOwns(t *testing.T) {
	tb, none := build(t, members(2)), build(t, nil)
	for p := range 16 {
		o, _ := tb.Owner(p)
		if !tb.Owns(p, o.ID) || tb.Owns(p, "other") || none.Owns(p, o.ID) {
			t.Fatalf("partition %d: Owns disagrees with Owner (%s)", p, o.ID)
		}
	}
}
