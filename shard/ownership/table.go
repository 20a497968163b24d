package ownership

import (
	"slices"

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
	// Widen: if From does not answer, the partitions still Pending are
	// taken over from every other member too before they are decided
	// (TakeoverEnded with Others: sweeps): the shard that the table moved
	// them from to From, or the destination of a final copy from From,
	// may decide them until its own table catches up. An owner table's
	// takeovers (Apply) widen; heal's, a recall's and sweeps do not.
	Widen bool
	// Sweep: this is one of those sweeps; it ends with TakeoverEnded's
	// Sweep.
	Sweep bool
}

// addTakeover adds partition p, taken over from from, to out.
func addTakeover(out []Takeover, from member.Member, p uint32) []Takeover {
	i := slices.IndexFunc(out, func(tk Takeover) bool { return tk.From.ID == from.ID })
	if i < 0 {
		i = len(out)
		out = append(out, Takeover{From: from})
	}
	out[i].Partitions = append(out[i].Partitions, p)
	return out
}

// Apply steps every partition through partition.OwnerChanged, from owner
// table prev to next as seen by member me, and returns the takeovers those
// steps asked for (the effects TakeOver, and TakeOverForward: from the shard a partition forwarded to), by previous owner in the order of
// prev's members. A partition that prev gives nobody (every lease was
// lost at once, or the last owner's lease ended while the next was
// joining) was last owned by the shard that the last table naming an
// owner named: it may hold counters, even decide it (a shard that
// restarted at the same address took a give-back), so it is taken over
// from there. A nil prev (the first table this shard sees) changes
// nothing, nor does any table while the shard is out (Leave): its own
// join decides what it owns then; and a table naming this shard while it
// is out names an earlier process's registration, not a last owner.
func (s *Set) Apply(me string, prev, next *shardmap.Table) []Takeover {
	if next == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables++
	defer func() {
		for p := range min(len(s.known), next.Partitions()) {
			if to, ok := s.parts[p].Forwards(); ok && next.Owns(p, to.ID) {
				s.switched[p] = true
			}
			// Out, a table naming this shard names an earlier process's
			// registration, whose counters died with it: the last owner
			// named before may hold them.
			if o, ok := next.Owner(p); ok && !(s.out && o.ID == me) {
				s.known[p] = o
			}
		}
	}()
	if prev == nil || s.out {
		return nil
	}
	var out []Takeover
	var all partition.Effect
	n := min(len(s.parts), prev.Partitions(), next.Partitions())
	for p := range n {
		was, ok := prev.Owner(p)
		if !ok {
			was = s.known[p]
		}
		is, _ := next.Owner(p)
		to, _ := s.parts[p].Forwards()
		fx := s.step(p, partition.Event{Kind: partition.OwnerChanged, Me: me, Was: was.ID, Is: is.ID})
		if fx&partition.TakeOver != 0 {
			out = addTakeover(out, was, uint32(p))
		}
		if fx&partition.TakeOverForward != 0 {
			out = addTakeover(out, to, uint32(p))
		}
		all |= fx
	}
	for i := range out {
		out[i].Widen = true
	}
	s.wake(all | partition.Wake) // a fenced export waits for the table (Behind)
	slices.SortStableFunc(out, func(a, b Takeover) int { return memberIndex(prev, a.From.ID) - memberIndex(prev, b.From.ID) })
	return out
}

// memberIndex is id's place among t's members, after them all if absent.
func memberIndex(t *shardmap.Table, id string) int {
	ms := t.Members()
	if i := slices.IndexFunc(ms, func(m member.Member) bool { return m.ID == id }); i >= 0 {
		return i
	}
	return len(ms)
}

// Dropping sorts out parts, which a hand-off's drop step asks this shard
// (member me, following owner table t; nil: none yet) to forget: it
// returns those to step through partition.Drop, and keeps the others,
// those that t, a table that arrived since their final copy (the switch),
// still gives this shard (the switch did not move them away: a member
// left meanwhile, and the owner function gave them back). Of these it
// recalls through partition.Recall those that forward, returning the
// takeovers that bring their counters back from where the final copy
// took them; any other keeps its counters (fenced since by a shard that
// followed a late table, it is this shard's to take back: heal). It keeps
// too, counters and all, one that forwards no more but is Fenced: fenced
// again since the final copy (taken back, then fenced by a lost lease or
// a taker's pull), its counters here may be the newest, which a taker
// has yet to pull; and one that forwards to a shard that no table since
// gave it to (t neither): the switch gave it to a third shard (this shard
// lost its lease meanwhile, and the owner function moved its partitions),
// which takes it over from here. One whose switch reached the
// destination, since moved on, is dropped: its counters went there.
func (s *Set) Dropping(me string, t *shardmap.Table, parts []uint32) (drop []uint32, recalls []Takeover) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var back []uint32
	for _, p := range parts {
		if int(p) >= len(s.parts) {
			continue
		}
		to, fwd := s.parts[p].Forwards()
		since := t != nil && int(p) < t.Partitions() && s.fencedAt[p] < s.tables // t came after the final copy
		if since && t.Owns(int(p), me) {
			if fwd {
				back = append(back, p)
			}
			continue
		}
		if since && fwd && !t.Owns(int(p), to.ID) && !s.switched[p] {
			continue // the switch gave it to a third shard, which takes it over from here
		}
		if !fwd && s.parts[p].State == partition.Fenced {
			continue // fenced since the final copy: its counters here may be the newest
		}
		drop = append(drop, p)
	}
	return drop, s.recall(back, "")
}

// LastOwners returns those of parts whose last named owner (by the tables
// Apply saw) is a shard other than me, grouped by that owner: who may
// hold their counters when the table names nobody (every lease was lost
// at once), for a join to pull them from with a fence.
func (s *Set) LastOwners(parts []uint32, me string) []Takeover {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Takeover
	for _, p := range parts {
		if int(p) >= len(s.known) || s.known[p].ID == "" || s.known[p].ID == me {
			continue
		}
		out = addTakeover(out, s.known[p], p)
	}
	return out
}

// Behind reports whether a fenced pull of parts by requester (a taker)
// finds this shard (member me) behind the table the taker follows: one of
// parts is neither decided nor on its way here, and the last table this
// shard saw name an owner named neither this shard nor the taker. The
// taker's table moved the partition from this shard, so this shard has a
// table to see yet that gives it here (with a takeover of its own, whose
// counters the taker needs): fencing it now would let that later step
// decide it beside the taker. Its export waits until it is not behind
// (Apply wakes WaitSettled's waiters at every table).
func (s *Set) Behind(parts []uint32, me, requester string) bool {
	if requester == "" {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.behind(parts, me, requester)
}

func (s *Set) behind(parts []uint32, me, requester string) bool {
	return slices.ContainsFunc(parts, func(p uint32) bool {
		if int(p) >= len(s.known) || !s.parts[p].Stuck() || s.parts[p].Takers > 0 {
			return false
		}
		k := s.known[p].ID
		return k != "" && k != me && k != requester
	})
}

// RecallUnswitched recalls (partition.Recall) the partitions that forward
// to a final copy's destination whose switch never came and never will:
// no table since the final copy gave them to it, and its member record is
// gone from staying (a joiner whose lease was lost, or that stopped,
// mid-join: its switch cannot write its record; or the destination of a
// pair between two other members lost its own), or drains (its drain
// hands over only what the table gives it, and its counters end with
// it: recalled while it still answers), where owner table t, as
// member me sees it, still gives them this shard. It returns
// the takeovers that bring their counters back from there, so that the
// source decides them again at once, not once heal finds them stuck. A
// destination that switched (then left) is left to the owner table's
// change (Apply). Nothing changes while the shard is out (Leave).
func (s *Set) RecallUnswitched(me string, t *shardmap.Table, staying []string) []Takeover {
	if t == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out {
		return nil
	}
	var back []uint32
	for p := range min(len(s.parts), t.Partitions()) {
		to, fwd := s.parts[p].Forwards()
		if fwd && !s.switched[p] && !slices.Contains(staying, to.ID) && t.Owns(p, me) {
			back = append(back, uint32(p))
		}
	}
	return s.recall(back, "")
}
