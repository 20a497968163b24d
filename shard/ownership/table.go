package ownership

import (
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Takeover is what this shard gains from one previous owner without a
// hand-off: it pulls Partitions from From (its record in the previous
// table: its last known address) with a fence, then settles them.
type Takeover struct {
	From       member.Member
	Partitions []uint32
}

// Apply moves the set from owner table prev to next, as seen by member
// me, and returns the takeovers to run, by previous owner in the order of
// prev's members; each must end with Settle. For each partition next
// gives me and prev gave another:
//   - brought here by a hand-off (Pulled since): Owned;
//   - owned by nobody in prev (the cluster's first shard): Owned, there
//     are no counters anywhere;
//   - otherwise Pending, and part of its previous owner's Takeover.
//
// A partition prev gave me and next does not keeps its state (routers that
// have not switched are still answered). Any partition that moves to
// another shard forgets that it was pulled here.
// A nil prev (the first table this shard sees) changes nothing: the
// shard's own join decides what it owns then.
func (s *Set) Apply(me string, prev, next *shardmap.Table) []Takeover {
	if prev == nil || next == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed()
	byOwner := map[int][]uint32{}
	n := min(len(s.states), prev.Partitions(), next.Partitions())
	for p := range n {
		was, _ := prev.Owner(p)
		is, _ := next.Owner(p)
		switch {
		case is.ID != me:
			if was.ID != is.ID {
				// Moved, and not here: what a hand-off pulled here ahead
				// of a switch that did not come is stale.
				s.pulled[p] = false
			}
		case was.ID == me:
		case s.pulled[p]:
			s.set(p, Owned)
			s.pulled[p] = false
		case prev.OwnerIndex(p) < 0:
			s.set(p, Owned)
		default:
			s.set(p, Pending)
			s.takers[p]++
			i := prev.OwnerIndex(p)
			byOwner[i] = append(byOwner[i], uint32(p))
		}
	}
	var out []Takeover
	for i, m := range prev.Members() {
		if parts := byOwner[i]; len(parts) > 0 {
			out = append(out, Takeover{From: m, Partitions: parts})
		}
	}
	return out
}
