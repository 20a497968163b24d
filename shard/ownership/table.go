package ownership

import (
	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/partition"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Takeover is what this shard gains from one previous owner without a
// hand-off: it pulls Partitions from From (its record in the previous
// table: its last known address) with a fence, then steps them through
// partition.TakeoverEnded.
type Takeover struct {
	From       member.Member
	Partitions []uint32
}

// Apply steps every partition through partition.OwnerChanged, from owner
// table prev to next as seen by member me, and returns the takeovers those
// steps asked for (the effect TakeOver), by previous owner in the order of
// prev's members. A nil prev (the first table this shard sees) changes
// nothing: the shard's own join decides what it owns then.
func (s *Set) Apply(me string, prev, next *shardmap.Table) []Takeover {
	if prev == nil || next == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byOwner := map[int][]uint32{}
	var all partition.Effect
	n := min(len(s.parts), prev.Partitions(), next.Partitions())
	for p := range n {
		was, _ := prev.Owner(p)
		is, _ := next.Owner(p)
		fx := s.step(p, partition.Event{Kind: partition.OwnerChanged, Me: me, Was: was.ID, Is: is.ID})
		if fx&partition.TakeOver != 0 {
			i := prev.OwnerIndex(p)
			byOwner[i] = append(byOwner[i], uint32(p))
		}
		all |= fx
	}
	s.wake(all)
	var out []Takeover
	for i, m := range prev.Members() {
		if parts := byOwner[i]; len(parts) > 0 {
			out = append(out, Takeover{From: m, Partitions: parts})
		}
	}
	return out
}

// Dropping sorts out parts, which a hand-off's drop step asks this shard
// (member me, following owner table t; nil: none yet) to forget: it
// returns those to step through partition.Drop, and recalls the others,
// which t still gives this shard (the switch did not move them away: a
// member left meanwhile, and the owner function gave them back), through
// partition.Recall when they forward, returning the takeovers that bring
// their counters back from where the final copy took them. A partition t
// gives this shard is never forgotten.
func (s *Set) Dropping(me string, t *shardmap.Table, parts []uint32) (drop []uint32, recalls []Takeover) {
	var mine []uint32
	for _, p := range parts {
		if t != nil && int(p) < t.Partitions() {
			if o, ok := t.Owner(int(p)); ok && o.ID == me {
				mine = append(mine, p)
				continue
			}
		}
		drop = append(drop, p)
	}
	if len(mine) == 0 {
		return drop, nil
	}
	return drop, s.Recall(mine, "")
}
