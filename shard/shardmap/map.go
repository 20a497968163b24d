package shardmap

import (
	"fmt"
	"time"

	"github.com/shardlimit/shardlimit/shard/member"
)

// Map is the published shard map: the partitions the rebalance job has
// pinned to a member. A partition without a pin ("") is placed by the
// bounded-load ring, as is a pinned one whose member is not live; so with no
// map, or an empty one, the ring alone decides.
type Map struct {
	// Version grows by one with every publication; the first map is 1.
	// Version 0 is the record that fixes the cluster's partition count
	// before any map is published (package mapstore's Partitions): it
	// pins nothing, so the ring decides alone, as with no map.
	Version int64 `json:"version"`
	// Partitions is the partition count the map was written for; a map for
	// another count is ignored.
	Partitions int `json:"partitions"`
	// Owners pins partition p to member Owners[p]; "" leaves it to the ring.
	Owners []string `json:"owners"`
	// Reason, WrittenAt and WrittenBy say why, when and by whom.
	Reason    string    `json:"reason"`
	WrittenAt time.Time `json:"written_at"`
	WrittenBy string    `json:"written_by"`
	// Moves are the partitions this version moved, for history.
	Moves []Move `json:"moves,omitempty"`
}

// Move is one partition moved by a map version.
type Move struct {
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	Load      uint64 `json:"load,omitempty"`
}

// Validate checks a map's shape against the partition count in use.
func (m *Map) Validate(partitions int) error {
	switch {
	case m.Version < 0:
		return fmt.Errorf("shard map version: %d is under 0", m.Version)
	case m.Version == 0 && m.Pinned() > 0:
		return fmt.Errorf("shard map version: 0 (the partition count's record) pins %d partitions; only a published version (1 on) pins", m.Pinned())
	case m.Partitions != partitions:
		return fmt.Errorf("shard map partitions: %d, but %d are in use", m.Partitions, partitions)
	case len(m.Owners) != m.Partitions:
		return fmt.Errorf("shard map owners: %d entries for %d partitions", len(m.Owners), m.Partitions)
	}
	return nil
}

// Pinned returns how many partitions the map pins.
func (m *Map) Pinned() int {
	n := 0
	for _, o := range m.Owners {
		if o != "" {
			n++
		}
	}
	return n
}

// Resolve returns the owners in force: ring's, overridden by every pin of m
// whose member is among ring's members. m may be nil. This is the one
// function routers and the rebalance job share to agree on owners.
func Resolve(ring *Table, m *Map) *Table {
	if m == nil || m.Partitions != ring.Partitions() || len(m.Owners) != m.Partitions {
		return ring
	}
	index := make(map[string]int, len(ring.members))
	for i, mem := range ring.members {
		index[mem.ID] = i
	}
	t := &Table{owners: make([]int, len(ring.owners)), members: ring.members}
	copy(t.owners, ring.owners)
	for p, id := range m.Owners {
		if i, live := index[id]; live && id != "" {
			t.owners[p] = i
		}
	}
	return t
}

// InForce returns the owners in force for members and map m: Build, then
// Resolve.
func InForce(cfg Config, members []member.Member, m *Map) (*Table, error) {
	ring, err := Build(cfg, members)
	if err != nil {
		return nil, err
	}
	return Resolve(ring, m), nil
}

// Owners returns the member ID owning each partition ("" when none).
func (t *Table) Owners() []string {
	out := make([]string, len(t.owners))
	for p, i := range t.owners {
		if i >= 0 {
			out[p] = t.members[i].ID
		}
	}
	return out
}
