package shard

import (
	"time"

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
}

// step steps parts (numbered among count) through e, the hand-off
// protocol's one state machine (package partition, through package
// ownership), and performs the effects it returns: the host's whole part
// in a step. A journal belongs to hand-off id. (TakeOver comes only from
// the owner table's changes: updateView starts those.)
func (s *Server) step(parts []uint32, count int, e partition.Event, id uint64) stepped {
	fx := s.owned.Step(parts, e)
	var out stepped
	if fx&partition.StartJournal != 0 {
		s.journal.start(parts, id) // before reading: no change is missed
	}
	if fx&partition.ReadJournal != 0 {
		// Fenced: every change is in the journal, and no more come.
		out.changed, out.onlyChanged = s.journal.take(parts, id)
	}
	if fx&partition.EndJournal != 0 {
		s.journal.end(parts)
	}
	if fx&partition.ForgetCounters != 0 {
		out.forgotten = s.store.Drop(parts, count, time.Now().UnixNano())
	}
	return out
}
