package shardmap

import (
	"fmt"
	"slices"
	"strings"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"

	"github.com/shardlimit/shardlimit/shard/member"
)

// Config shapes the ring. Every router and the rebalance job must use the
// same values, or they disagree on owners.
type Config struct {
	// Partitions is the number of partitions; default DefaultPartitions.
	// A cluster's count is fixed once, in its shard map record (package
	// mapstore's Partitions): components take it from there.
	Partitions int
	// ReplicationFactor is the number of points per member on the ring;
	// default 40.
	ReplicationFactor int
	// Load bounds a member's partitions to Load × the mean; default 1.25.
	Load float64
}

// DefaultPartitions is the partition count of a new cluster whose first
// component was given none.
const DefaultPartitions = 1024

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Partitions: DefaultPartitions, ReplicationFactor: 40, Load: 1.25}
}

// Validate names the first field out of bounds.
func (c Config) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > 1<<16:
		return fmt.Errorf("partitions: %d not in 1..%d", c.Partitions, 1<<16)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > 1000:
		return fmt.Errorf("replication factor: %d not in 1..1000", c.ReplicationFactor)
	case c.Load <= 1 || c.Load > 10:
		return fmt.Errorf("load: %v not in (1, 10]", c.Load)
	}
	return nil
}

// Table is an immutable assignment of every partition to a member.
type Table struct {
	owners  []int // partition → index into members, -1 when no member
	members []member.Member
}

// Partitions returns the number of partitions.
func (t *Table) Partitions() int { return len(t.owners) }

// Owner returns the member that owns partition p, and false when there are
// no members.
func (t *Table) Owner(p int) (member.Member, bool) {
	i := t.owners[p]
	if i < 0 {
		return member.Member{}, false
	}
	return t.members[i], true
}

// PartitionsOf returns the partitions t gives member id, in order.
func (t *Table) PartitionsOf(id string) []uint32 {
	var out []uint32
	for p, i := range t.owners {
		if i >= 0 && t.members[i].ID == id {
			out = append(out, uint32(p))
		}
	}
	return out
}

// OwnerIndex returns the index into Members of partition p's owner, or -1.
func (t *Table) OwnerIndex(p int) int { return t.owners[p] }

// Members returns the serving members the table was built from, sorted by
// ID.
func (t *Table) Members() []member.Member { return t.members }

// Count returns how many partitions each member owns, by ID.
func (t *Table) Count() map[string]int {
	out := make(map[string]int, len(t.members))
	for _, i := range t.owners {
		if i >= 0 {
			out[t.members[i].ID]++
		}
	}
	return out
}

type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// Build assigns every partition to one of the serving members with the
// bounded-load ring; a joining or draining member owns nothing and is left
// out of the table. The result depends only on cfg and the set of serving
// member IDs.
func Build(cfg Config, members []member.Member) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ms := make([]member.Member, 0, len(members))
	for _, m := range members {
		if m.Serving() {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b member.Member) int { return strings.Compare(a.ID, b.ID) })
	ms = slices.CompactFunc(ms, func(a, b member.Member) bool { return a.ID == b.ID })
	t := &Table{owners: make([]int, cfg.Partitions), members: ms}
	if len(ms) == 0 {
		for p := range t.owners {
			t.owners[p] = -1
		}
		return t, nil
	}
	// The ring needs at least one partition per member; with more members
	// than partitions, the members after the first Partitions own nothing.
	ringMembers := make([]consistent.Member, 0, min(len(ms), cfg.Partitions))
	for _, m := range ms[:min(len(ms), cfg.Partitions)] {
		ringMembers = append(ringMembers, m)
	}
	ring := consistent.New(ringMembers, consistent.Config{
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
		Hasher:            hasher{},
	})
	index := make(map[string]int, len(ms))
	for i, m := range ms {
		index[m.ID] = i
	}
	for p := range t.owners {
		t.owners[p] = index[ring.GetPartitionOwner(p).String()]
	}
	return t, nil
}

// Ownerless returns the partitions that after gives member id and before
// gives nobody (every lease was lost at once): a join gains them from the
// shards that last owned them.
func Ownerless(before, after *Table, id string) []uint32 {
	var out []uint32
	for _, p := range after.PartitionsOf(id) {
		if _, ok := before.Owner(int(p)); !ok {
			out = append(out, p)
		}
	}
	return out
}

// Owns reports whether the table gives partition p to member id.
func (t *Table) Owns(p int, id string) bool {
	o, ok := t.Owner(p)
	return ok && o.ID == id
}
