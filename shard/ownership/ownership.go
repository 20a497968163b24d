package ownership

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/partition"
)

// Set holds the state of every partition at this shard. It is safe for
// concurrent use.
type Set struct {
	mu    sync.RWMutex
	parts []partition.Partition
	// settled is closed, and replaced, whenever a step has the effect
	// partition.Wake.
	settled chan struct{}
	// suspended stops every decision, whatever the partitions' states, while
	// the shard's lease is unconfirmed past its time (Suspend). Set under
	// the write lock (so that batches in flight end first); read without.
	suspended atomic.Bool
	// known is, by partition, the last owner a table Apply saw named (ID
	// "": none yet).
	known []member.Member
	// out: the shard is not registered (Leave), so the tables it sees
	// name an earlier registration, not it.
	out bool
	// tables counts the tables Apply saw; fencedAt is, by partition, that
	// count when a final copy last fenced it (Dropping). switched: a table
	// since that final copy gave it to the shard it forwards to (the
	// hand-off's switch came).
	tables   uint64
	fencedAt []uint64
	switched []bool
	// fencing counts, by partition, the takers' fenced pulls that asked
	// for it and wait here (FenceDecided to FenceEnded): a step that
	// makes it decided meanwhile fences it at once (fenceWaited), and a
	// drop keeps its counters for them (stepAll).
	fencing []uint16
	// fencedBy is, by partition, the taker whose fenced pull last asked
	// for it here (FenceDecided): who may hold its counters, or decide it,
	// once no table names that taker (FencedBy).
	fencedBy []member.Member
}

// New returns a Set of partitions partitions, all Unowned.
func New(partitions int) *Set {
	return &Set{parts: make([]partition.Partition, partitions), settled: make(chan struct{}), known: make([]member.Member, partitions),
		fencedAt: make([]uint64, partitions), switched: make([]bool, partitions), fencing: make([]uint16, partitions),
		fencedBy: make([]member.Member, partitions)}
}

// Step steps those of parts in range through event e (partition.Step),
// under the write lock, so that once it returns no batch still decides a
// partition that e stopped deciding. It returns the effects of each
// partition's step, which the caller performs (all but Wake, which Step
// performs itself). If any partition's step refuses the event, none
// changes, and the effects say which refused. For FinalPulled and
// FencedPulled it fills each partition's Event.Is with the last owner the
// tables it applied named.
func (s *Set) Step(parts []uint32, e partition.Event) Effects {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stepAll(parts, e)
}

// stepAll is Step under the write lock, which the caller holds.
func (s *Set) stepAll(parts []uint32, e partition.Event) Effects {
	fx := Effects{parts: parts, each: make([]partition.Effect, len(parts))}
	next := make([]partition.Partition, len(parts))
	for i, p := range parts {
		if int(p) < len(s.parts) {
			if e.Kind == partition.FinalPulled || e.Kind == partition.FencedPulled {
				e.Is = s.known[p].ID
			}
			_, fwd := s.parts[p].Forwards()
			fenced := s.parts[p].State == partition.Fenced && (!fwd || !s.switched[p])
			next[i], fx.each[i] = partition.Step(s.parts[p], e)
			if e.Kind == partition.Drop && (s.fencing[p] > 0 || fenced) {
				// A taker's fenced pull waiting here reads its
				// counters; or one may come: fenced here and not
				// forwarded (a lost lease, a taker's pull that may have
				// failed), or forwarded to a shard that no table has
				// given it since (a third shard takes it over from
				// here), its counters may be the newest. Keep them
				// (they expire as any key does).
				fx.each[i] &^= partition.ForgetCounters
			}
			fx.all |= fx.each[i]
		}
	}
	if fx.all&partition.Refuse != 0 {
		return fx
	}
	for i, p := range parts {
		if int(p) < len(s.parts) {
			s.parts[p] = next[i]
			if e.Kind == partition.FinalExport {
				s.fencedAt[p], s.switched[p] = s.tables, false
			}
			fx.each[i] |= s.fenceWaited(int(p))
			fx.all |= fx.each[i]
		}
	}
	s.wake(fx.all)
	return fx
}

// fenceWaited fences partition p (partition.FencedExport) if it is
// decided while a taker's fenced pull that asked for it waits here, and
// returns the effects. The caller holds the write lock, and calls it after
// every step that may make p decided: the pull's export would fence it
// anyway once it stops waiting, but the taker may give up waiting first
// and decide it from what arrived.
func (s *Set) fenceWaited(p int) partition.Effect {
	if s.fencing[p] == 0 || !s.parts[p].Decides() {
		return 0
	}
	var fx partition.Effect
	s.parts[p], fx = partition.Step(s.parts[p], partition.Event{Kind: partition.FencedExport})
	return fx
}

// FenceDecided, for a taker's fenced pull (by: the taker, noted for
// FencedBy; zero: none), steps those of parts decided here (Owned), or to be decided
// once a takeover here ends (Pending), through partition.FencedExport, at
// once and under the write lock, and returns the effects, which the
// caller performs as Step's; until FenceEnded(parts), any of parts that a
// step makes decided is fenced at once too. A taker's fenced pull does so
// as it arrives (after any Recall, which makes a partition Pending),
// before it waits for the others to settle, and ends it once its export
// has fenced them all (or gave up): the taker gives up on a silent owner
// and decides from what arrived, and an owner that waited for another
// partition (its own takeover, which may wait for the taker in turn) must
// not be deciding any of these then, not even one that its own takeover
// or copy made decided meanwhile, nor once a takeover here ends after the
// pull stopped waiting (a fence keeps the takeover under way: the export
// waits for its counters).
func (s *Set) FenceDecided(parts []uint32, by member.Member) Effects {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		if int(p) < len(s.fencing) {
			s.fencing[p]++
			if by.ID != "" {
				s.fencedBy[p] = by
			}
		}
	}
	return s.stepAll(s.those(parts, decidesOrWill), partition.Event{Kind: partition.FencedExport})
}

// decidesOrWill reports whether p is decided here, or will be once its
// takeover here ends.
func decidesOrWill(p partition.Partition) bool {
	return p.Decides() || p.State == partition.Pending
}

// FenceEnded ends what FenceDecided(parts) began: the pull stopped
// waiting, so a step may make them decided again.
func (s *Set) FenceEnded(parts []uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		if int(p) < len(s.fencing) && s.fencing[p] > 0 {
			s.fencing[p]--
		}
	}
}

// Effects are the effects of one Step, partition by partition.
type Effects struct {
	parts []uint32
	each  []partition.Effect
	all   partition.Effect
}

// Of returns the partitions whose step had effect one.
func (fx Effects) Of(one partition.Effect) []uint32 {
	if fx.all&one == 0 {
		return nil
	}
	var out []uint32
	for i, p := range fx.parts {
		if fx.each[i]&one != 0 {
			out = append(out, p)
		}
	}
	return out
}

// step steps partition p through e (and fences it if a taker's pull
// waits for it: fenceWaited). The caller holds the write lock and wakes
// WaitSettled for the effects (wake).
func (s *Set) step(p int, e partition.Event) partition.Effect {
	var fx partition.Effect
	s.parts[p], fx = partition.Step(s.parts[p], e)
	return fx | s.fenceWaited(p)
}

// wake wakes WaitSettled if fx says so. The caller holds the write lock.
func (s *Set) wake(fx partition.Effect) {
	if fx&partition.Wake != 0 {
		close(s.settled)
		s.settled = make(chan struct{})
	}
}

// Begin starts a batch of decisions: until End, no partition stops being
// decided. Decides may be called in between.
func (s *Set) Begin() {
	if s != nil {
		s.mu.RLock()
	}
}

// End ends what Begin started.
func (s *Set) End() {
	if s != nil {
		s.mu.RUnlock()
	}
}

// Decides reports whether partition p's checks are decided here; only
// between Begin and End. A partition out of range is not decided.
func (s *Set) Decides(p uint32) bool {
	if s == nil {
		return true
	}
	return !s.suspended.Load() && int(p) < len(s.parts) && s.parts[p].Decides()
}

// ForwardTo returns the next owner that partition p's checks are
// forwarded to (a planned hand-off's final copy fenced it here), if any;
// only between Begin and End.
func (s *Set) ForwardTo(p uint32) (member.Member, bool) {
	if s == nil || int(p) >= len(s.parts) {
		return member.Member{}, false
	}
	return s.parts[p].Forwards()
}

// StuckAgain returns those of stuck (found stuck at this look, at time
// now) that were stuck at the last look too (their first look in
// since), and the first look of each of stuck, to pass to the next one:
// heal's bookkeeping, in the host's time or the simulation's ticks.
func StuckAgain[T any](stuck []uint32, since map[uint32]T, now T) (again []uint32, next map[uint32]T) {
	next = make(map[uint32]T, len(stuck))
	for _, p := range stuck {
		first, seen := since[p]
		if !seen {
			first = now
		} else {
			again = append(again, p)
		}
		next[p] = first
	}
	return again, next
}

// Healable returns those of parts (partitions the owner table gives this
// shard, found stuck by its safety net, heal) that heal takes back now:
// all but those a planned hand-off fenced here, forwarding to a next
// owner that is still a member (isMember), that have not waited
// (waited) for the hand-off's switch, which may still come. One that a
// table applied since its final copy still gives this shard waits no
// more: the switch came and kept it here (the rebalance job's map keeps a
// pair whose final copy failed with its source: package handoff's
// KeepSources), so nothing else decides its checks. (A table that is not
// the switch, a member joining or leaving meanwhile, ends the wait too:
// should the switch then move it, its next owner takes it over from
// here.) It keeps parts' order, in place. The host and the simulation
// both ask it.
func (s *Set) Healable(parts []uint32, waited func(p uint32) bool, isMember func(member.Member) bool) []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.DeleteFunc(parts, func(p uint32) bool {
		if int(p) >= len(s.parts) {
			return true
		}
		to, ok := s.parts[p].Forwards()
		return ok && !waited(p) && isMember(to) && s.fencedAt[p] == s.tables
	})
}

// Suspend stops every decision, keeping each partition's state, until
// Resume: once it returns, no batch decides anything. A shard suspends
// while its lease may have expired: another shard may have taken its
// partitions over, and it must not decide them beside it. It reports
// whether the set was not suspended already.
func (s *Set) Suspend() bool {
	if s.suspended.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.suspended.Swap(true)
}

// Resume ends Suspend: the partitions are decided by their states again.
// It reports whether the set was suspended. Out of the cluster (Leave),
// it does nothing: only Enter ends that (a lease guard that found the
// lease confirmed may call it just after the lease was lost).
func (s *Set) Resume() bool {
	if !s.suspended.Load() {
		return false // the lease guard's every tick: no lock taken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.out && s.suspended.Swap(false)
}

// Leave takes the shard out of the cluster until Enter: it decides
// nothing (Suspend), and the owner tables it sees change no partition
// (Apply only notes their owners): they name an earlier registration of
// this shard, whose partitions their takers took over (a lost lease), or
// another process (one restarted within its predecessor's lease). A shard
// leaves as it starts and once its lease is lost.
func (s *Set) Leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = true
	s.suspended.Store(true)
}

// Enter ends Leave once the shard registered: every partition decided
// meanwhile (a give-back or a fenced copy that followed another
// registration's table) is fenced, any other that such a copy marked
// pulled here is not (a table moving it here takes it over), and the
// shard decides what the states say; its join decides what it owns. It
// reports whether the set was out.
func (s *Set) Enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.out {
		return false
	}
	s.out = false
	for p := range s.parts {
		switch {
		case s.parts[p].State == partition.Owned:
			s.step(p, partition.Event{Kind: partition.FencedExport})
		case s.parts[p].Pulled:
			// A copy that came while out followed another registration's
			// table, and no table's step since could find it stale: the
			// shard it came from may have decided the partition again.
			// The table that gives it here takes it over from there.
			s.parts[p].Pulled, s.parts[p].From = false, ""
		}
	}
	s.suspended.Store(false)
	return true
}

// Suspended reports whether decisions are suspended.
func (s *Set) Suspended() bool { return s.suspended.Load() }

// State returns partition p's state.
func (s *Set) State(p int) partition.State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.parts[p].State
}

// Count returns how many partitions are in each state, indexed by state.
func (s *Set) Count() []int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]int, len(partition.States()))
	for _, p := range s.parts {
		out[p.State]++
	}
	return out
}

// ForwardTargets returns the next owners that those of parts fenced by a
// planned hand-off forward to, each once.
func (s *Set) ForwardTargets(parts []uint32) []member.Member {
	return s.membersOf(parts, func(p uint32) member.Member {
		to, _ := s.parts[p].Forwards()
		return to
	})
}

// FencedBy returns the takers whose fenced pulls last asked for any of
// parts here (FenceDecided), but me: heal takes a stuck partition back
// from them too, as the last of them may hold its counters, or decide it
// (its takeover ending), once no table names it (it lost its lease).
func (s *Set) FencedBy(parts []uint32, me string) []member.Member {
	return s.membersOf(parts, func(p uint32) member.Member {
		if s.fencedBy[p].ID == me {
			return member.Member{}
		}
		return s.fencedBy[p]
	})
}

// membersOf returns the members that of names for those of parts in
// range (zero: none), each once, in order.
func (s *Set) membersOf(parts []uint32, of func(p uint32) member.Member) []member.Member {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []member.Member
	for _, p := range parts {
		if int(p) >= len(s.parts) {
			continue
		}
		if m := of(p); m.ID != "" && !slices.ContainsFunc(out, func(o member.Member) bool { return o.ID == m.ID }) {
			out = append(out, m)
		}
	}
	return out
}

// WaitSettled waits until none of parts is settling (partition's
// Settling: Pending, Receiving, or a takeover under way), or ctx ends, and
// reports whether none is.
func (s *Set) WaitSettled(ctx context.Context, parts []uint32) bool {
	return s.WaitExportable(ctx, parts, "", "")
}

// WaitExportable waits until a fenced pull of parts by requester can be
// exported: none of parts is settling (WaitSettled) and this shard is not
// behind the taker's table (Behind; requester "": not asked), or ctx
// ends, and reports whether it can.
func (s *Set) WaitExportable(ctx context.Context, parts []uint32, me, requester string) bool {
	for {
		s.mu.RLock()
		wait := s.settling(parts) || requester != "" && s.behind(parts, me, requester)
		ch := s.settled
		s.mu.RUnlock()
		if !wait {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Settling reports whether any of parts is settling (partition's
// Settling): its counters are on their way here.
func (s *Set) Settling(parts []uint32) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.settling(parts)
}

func (s *Set) settling(parts []uint32) bool {
	return slices.ContainsFunc(parts, func(p uint32) bool { return int(p) < len(s.parts) && s.parts[p].Settling() })
}

// Stuck returns those of parts, which the owner table gives this shard,
// that are Stuck (neither decided nor being taken over): a state that no
// hand-off or takeover leaves behind for long, and that would answer
// their checks by policy for good if left alone.
func (s *Set) Stuck(parts []uint32) []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.those(parts, partition.Partition.Stuck)
}

// those returns those of parts in range whose partition is. The caller
// holds the lock.
func (s *Set) those(parts []uint32, is func(partition.Partition) bool) []uint32 {
	var out []uint32
	for _, p := range parts {
		if int(p) < len(s.parts) && is(s.parts[p]) {
			out = append(out, p)
		}
	}
	return out
}

// Recall steps those of parts that forward (a planned hand-off's final
// copy fenced them here, and its switch never came: their counters are at
// the shard they forward to), except to requester, through
// partition.Recall, and returns the takeovers that bring them back, by the
// shard they forwarded to. An export of such a partition waits for them,
// so that it never reads counters that were left behind; an export to the
// shard it forwards to reads what is here (that shard merges it with its
// own).
func (s *Set) Recall(parts []uint32, requester string) []Takeover {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recall(parts, requester)
}

// recall is Recall; the caller holds the write lock.
func (s *Set) recall(parts []uint32, requester string) []Takeover {
	var out []Takeover
	var all partition.Effect
	for _, p := range parts {
		if int(p) >= len(s.parts) {
			continue
		}
		to, ok := s.parts[p].Forwards()
		if !ok || to.ID == requester {
			continue
		}
		all |= s.step(int(p), partition.Event{Kind: partition.Recall})
		out = addTakeover(out, to, p)
	}
	s.wake(all)
	return out
}

// Reclaim steps those of parts still Stuck through partition.Reclaim,
// each waiting for takers takeovers (each ends with TakeoverEnded), and
// returns them. With takers 0 (nobody to take them from) it decides each
// at once, unless a takeover or sweep of it is still under way.
func (s *Set) Reclaim(parts []uint32, takers int) []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint32
	var all partition.Effect
	for _, p := range parts {
		if int(p) < len(s.parts) && s.parts[p].Stuck() {
			all |= s.step(int(p), partition.Event{Kind: partition.Reclaim, Takers: takers})
			out = append(out, p)
		}
	}
	s.wake(all)
	return out
}
