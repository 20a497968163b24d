package shard

import (
	"time"

	"github.com/shardlimit/shardlimit/shard/ownership"
	"github.com/shardlimit/shardlimit/shard/partition"
)

// stepped is what performing a step's effects produced.
type stepped struct {
	// changed are the keys a final copy reads (ReadJournal), when
	// onlyChanged; otherwise it reads the whole partitions.
	changed     []string
	onlyChanged bool
	// forgotten counts the keys deleted (ForgetCounters).
	forgotten int
	// refused are the partitions that refused the event (Refuse): then
	// none changed, and no other effect was performed.
	refused []uint32
}

// step steps parts (numbered among count) through e, the hand-off
// protocol's one state machine (package partition, through package
// ownership), and performs the effects it returns: the host's whole part
// in a step. A journal belongs to hand-off id. (TakeOver is not among
// them: updateView, Recall, a drop's recall, RecallUnswitched and heal
// start their takeovers themselves.)
func (s *Server) step(parts []uint32, count int, e partition.Event, id uint64) stepped {
	return s.perform(s.owned.Step(parts, e), count, id)
}

// perform performs the effects of a step (step's), for hand-off id.
func (s *Server) perform(fx ownership.Effects, count int, id uint64) stepped {
	var out stepped
	if out.refused = fx.Of(partition.Refuse); out.refused != nil {
		return out
	}
	if ps := fx.Of(partition.StartJournal); ps != nil {
		s.journal.start(ps, id) // before reading: no change is missed
	}
	if ps := fx.Of(partition.ReadJournal); ps != nil {
		// Fenced: every change is in the journal, and no more come.
		out.changed, out.onlyChanged = s.journal.take(ps, id)
	}
	if ps := fx.Of(partition.EndJournal); ps != nil {
		s.journal.end(ps)
	}
	if ps := fx.Of(partition.ForgetCounters); ps != nil {
		out.forgotten = s.store.Drop(ps, count, time.Now().UnixNano())
	}
	return out
}
