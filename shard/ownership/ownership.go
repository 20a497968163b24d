package ownership

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/shardlimit/shard/member"
)

// State is a partition's state at this shard.
type State uint8

// The states; see the package documentation.
const (
	Unowned State = iota
	Owned
	Pending
	Fenced
	Receiving
	states // how many
)

var stateNames = [states]string{"unowned", "owned", "pending", "fenced", "receiving"}

func (s State) String() string {
	if s < states {
		return stateNames[s]
	}
	return "unknown"
}

// States lists every state, for metrics.
func States() []State { return []State{Unowned, Owned, Pending, Fenced, Receiving} }

// Set holds the state of every partition. It is safe for concurrent use.
type Set struct {
	mu     sync.RWMutex
	states []State
	// pulled marks partitions a hand-off brought here since the owner
	// table last gave them to this shard: the next such change finds their
	// counters here already.
	pulled []bool
	// takers counts each partition's takeovers under way: a partition
	// whose owner changed twice in quick succession waits for both.
	takers []uint16
	// forward is, for a Fenced partition that a planned hand-off moved, its
	// next owner, to which its checks are forwarded; nil otherwise.
	forward []*member.Member
	// settled is closed, and replaced, whenever a Pending or Receiving
	// partition settles; wake marks such a change under way.
	settled chan struct{}
	wake    bool
	// suspended stops every decision, whatever the partitions' states, while
	// the shard's lease is unconfirmed past its time (Suspend). Set under
	// the write lock (so that batches in flight end first); read without.
	suspended atomic.Bool
}

// New returns a Set of partitions partitions, all Unowned.
func New(partitions int) *Set {
	return &Set{
		states: make([]State, partitions), pulled: make([]bool, partitions), takers: make([]uint16, partitions),
		forward: make([]*member.Member, partitions), settled: make(chan struct{}),
	}
}

// set changes partition p's state and forwards it nowhere (FenceForward
// sets a forward after it); a partition that leaves Pending or Receiving
// wakes WaitSettled when the change ends (changed). The caller holds the
// write lock.
func (s *Set) set(p int, st State) {
	if was := s.states[p]; (was == Pending || was == Receiving) && st != was {
		s.wake = true
	}
	s.states[p] = st
	s.forward[p] = nil
}

// changed ends a change under the write lock: it wakes WaitSettled if a
// partition settled.
func (s *Set) changed() {
	if s.wake {
		s.broadcast()
		s.wake = false
	}
}

// broadcast wakes WaitSettled. The caller holds the write lock.
func (s *Set) broadcast() {
	close(s.settled)
	s.settled = make(chan struct{})
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
	return !s.suspended.Load() && int(p) < len(s.states) && s.states[p] == Owned
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
// It reports whether the set was suspended.
func (s *Set) Resume() bool {
	return s.suspended.Swap(false)
}

// Suspended reports whether decisions are suspended.
func (s *Set) Suspended() bool { return s.suspended.Load() }

// ForwardTo returns the next owner that partition p's checks are
// forwarded to (a planned hand-off fenced it here with FenceForward), if
// any; only between Begin and End.
func (s *Set) ForwardTo(p uint32) (member.Member, bool) {
	if s == nil || int(p) >= len(s.states) || s.states[p] != Fenced || s.forward[p] == nil {
		return member.Member{}, false
	}
	return *s.forward[p], true
}

// State returns partition p's state.
func (s *Set) State(p int) State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.states[p]
}

// Count returns how many partitions are in each state.
func (s *Set) Count() [states]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out [states]int
	for _, st := range s.states {
		out[st]++
	}
	return out
}

// each calls f for every partition of parts in range, under the write
// lock.
func (s *Set) each(parts []uint32, f func(p int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed()
	for _, p := range parts {
		if int(p) < len(s.states) {
			f(int(p))
		}
	}
}

// Pulled records that a fenced copy brought parts here, ahead of the owner
// table giving them to this shard: they are decided from now on, except
// those Pending (their takeover settles them).
func (s *Set) Pulled(parts []uint32) {
	s.each(parts, func(p int) {
		s.pulled[p] = true
		if s.states[p] != Pending {
			s.set(p, Owned)
		}
	})
}

// Received records that a planned hand-off's final copy of parts arrived:
// those still Receiving are decided from now on, and they and those
// already Owned are pulled (the owner table giving them here later needs
// no takeover). One fenced meanwhile (the shard lost its lease) or being
// taken over stays as it is.
func (s *Set) Received(parts []uint32) {
	s.each(parts, func(p int) {
		switch s.states[p] {
		case Receiving:
			s.set(p, Owned)
			s.pulled[p] = true
		case Owned:
			s.pulled[p] = true
		}
	})
}

// ForwardTargets returns the next owners that those of parts fenced by a
// planned hand-off forward to, each once.
func (s *Set) ForwardTargets(parts []uint32) []member.Member {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []member.Member
	for _, p := range parts {
		if int(p) >= len(s.states) || s.states[p] != Fenced || s.forward[p] == nil {
			continue
		}
		if to := *s.forward[p]; !slices.ContainsFunc(out, func(m member.Member) bool { return m.ID == to.ID }) {
			out = append(out, to)
		}
	}
	return out
}

// Unreceive records that a final copy of parts failed: those Receiving are
// Unowned again, not pulled, so that the owner table giving them to this
// shard makes them Pending, taken over with a fence (Apply).
func (s *Set) Unreceive(parts []uint32) {
	s.each(parts, func(p int) {
		if s.states[p] == Receiving {
			s.set(p, Unowned)
			s.pulled[p] = false
		}
	})
}

// Receive records that a planned hand-off's final copy of parts is under
// way: they are not decided until Pulled, and the checks their previous
// owner forwards here wait for that (WaitSettled). Those Pending keep
// their takeover.
func (s *Set) Receive(parts []uint32) {
	s.each(parts, func(p int) {
		if s.states[p] != Pending {
			s.set(p, Receiving)
		}
	})
}

// Dropped records that a hand-off has taken parts away and this shard
// forgot them: Unowned.
func (s *Set) Dropped(parts []uint32) {
	s.each(parts, func(p int) {
		s.set(p, Unowned)
		s.pulled[p] = false
	})
}

// Fence stops deciding parts, which a taker is about to read: once Fence
// returns, no batch decides them any more.
func (s *Set) Fence(parts []uint32) {
	s.each(parts, func(p int) {
		s.set(p, Fenced)
		s.pulled[p] = false
	})
}

// FenceForward stops deciding parts, as Fence does, for a planned
// hand-off to their next owner to: from then on their checks are
// forwarded there (ForwardTo), so that routers that have not switched yet
// are still answered exactly. Dropped, a plain Fence, or any other change
// of state, ends the forwarding.
func (s *Set) FenceForward(parts []uint32, to member.Member) {
	s.each(parts, func(p int) {
		s.set(p, Fenced)
		s.pulled[p] = false
		s.forward[p] = &to
	})
}

// Settle ends one takeover of parts (one that Apply returned): those
// still Pending, and with no other takeover under way, are decided from
// now on.
func (s *Set) Settle(parts []uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		if int(p) >= len(s.states) {
			continue
		}
		if s.takers[p] > 0 {
			s.takers[p]--
		}
		if s.states[p] == Pending && s.takers[p] == 0 {
			s.set(int(p), Owned)
		}
	}
	s.broadcast() // a takeover ended, whatever is left Pending
	s.wake = false
}

// WaitSettled waits until none of parts is Pending or Receiving, or ctx
// ends, and reports whether none is.
func (s *Set) WaitSettled(ctx context.Context, parts []uint32) bool {
	for {
		s.mu.RLock()
		pending := false
		for _, p := range parts {
			if int(p) < len(s.states) && (s.states[p] == Pending || s.states[p] == Receiving) {
				pending = true
				break
			}
		}
		ch := s.settled
		s.mu.RUnlock()
		if !pending {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// Stuck returns those of parts, which the owner table gives this shard,
// that are neither decided nor being taken over (Fenced or Unowned): a
// state that no hand-off or takeover leaves behind for long, and that
// would answer their checks by policy for good if left alone.
func (s *Set) Stuck(parts []uint32) []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []uint32
	for _, p := range parts {
		if int(p) < len(s.states) && (s.states[p] == Fenced || s.states[p] == Unowned) {
			out = append(out, p)
		}
	}
	return out
}

// Reclaim makes those of parts still Fenced or Unowned Pending, each
// waiting for takers takeovers (each ends with Settle), and returns them.
func (s *Set) Reclaim(parts []uint32, takers int) []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed()
	var out []uint32
	for _, p := range parts {
		if int(p) < len(s.states) && (s.states[p] == Fenced || s.states[p] == Unowned) {
			s.set(int(p), Pending)
			s.takers[p] += uint16(takers)
			out = append(out, p)
		}
	}
	return out
}
