package shard

import (
	"sync"
	"sync/atomic"
)

// journal records which keys of the partitions being handed over change
// between a planned hand-off's first copy and its final, fenced one, so
// that the final copy, during which the partitions are decided by nobody
// and their forwarded checks wait, reads only those keys instead of the
// whole partitions.
//
// The decision path appends a batch's keys before the batch ends (before
// ownership's End), so once a fence returns, every change decided before it
// is in the journal. Appending the check's stored key (one allocation) is
// all it does per check (a key decided twice is recorded twice; take
// removes the repeats, outside the lock).
// Each journal belongs to one hand-off (its id): a final copy reads only
// the journal its own first copy started. A journal left behind by a
// hand-off that never made its final copy ends when its partitions are
// fenced, dropped or journaled again, or when the journal overflows: past
// maxJournalKeys records or maxJournalBytes of keys it forgets them all and
// records nothing more, and final copies read whole partitions.
type journal struct {
	active atomic.Bool // any partition journaled: the decision path looks
	mu     sync.Mutex
	// parts holds each journaled partition's records, indexed by
	// partition (maxExportPartitions of them once any was); nil: not
	// journaled.
	parts []*partJournal
	n     int // records held, over every partition
	bytes int // their keys' bytes
	on    int // partitions journaled
}

// partJournal is one partition's journal: the hand-off it belongs to and
// the keys recorded, as stored, oldest first.
type partJournal struct {
	id   uint64
	keys []string // stored keys
}

// maxJournalKeys bounds the records a journal holds (16 MiB of string
// headers), and maxJournalBytes their keys' bytes (however long the users
// a flood sends): at the 1M keys per second a hand-off streams
// (BENCHMARKS.md), reading as many keys whole costs about a second.
const (
	maxJournalKeys  = 1 << 20
	maxJournalBytes = 64 << 20
)

// start journals parts afresh for hand-off id.
func (j *journal) start(parts []uint32, id uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.parts == nil {
		j.parts = make([]*partJournal, maxExportPartitions)
	}
	j.detach(parts)
	for _, p := range parts {
		if j.parts[p] == nil { // a partition listed twice counts once
			j.on++
		}
		j.parts[p] = &partJournal{id: id}
	}
	j.active.Store(j.on > 0)
}

// record notes the keys of the checks decided or refunded in journaled
// partitions (as Store.DecideBatch stored them). Only on the decision
// path, after DecideBatch and before the batch ends.
func (j *journal) record(checks []BatchCheck) {
	if !j.active.Load() {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.parts == nil {
		return // overflowed meanwhile
	}
	for i := range checks {
		c := &checks[i]
		if c.Skip || j.parts[c.Partition] == nil {
			continue
		}
		var buf [stackKey]byte
		if !j.add(c.Partition, string(storedKey(buf[:0], c.Limiter.Algorithm, c.Service, c.Rule, c.User))) {
			return
		}
	}
}

// add records k in partition p if p is journaled, and reports whether the
// journal goes on (it did not overflow). The caller holds mu, and the
// journal has not overflowed.
func (j *journal) add(p int, k string) bool {
	pj := j.parts[p]
	if pj == nil {
		return true
	}
	if j.n == maxJournalKeys || j.bytes+len(k) > maxJournalBytes {
		j.overflow()
		return false
	}
	pj.keys = append(pj.keys, k)
	j.n++
	j.bytes += len(k)
	return true
}

// recordImported notes the keys a merge changed in journaled partitions
// (numbered among count): a takeover or a lost shard's give-back can
// import into partitions a hand-off is moving.
func (j *journal) recordImported(keys []Exported, count int) {
	if !j.active.Load() {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.parts == nil {
		return
	}
	for i := range keys {
		if !j.add(keys[i].partition(count), string(keys[i].Key)) {
			return
		}
	}
}

// overflow forgets every journal: their final copies read the whole
// partitions. The caller holds mu.
func (j *journal) overflow() {
	j.parts, j.n, j.bytes, j.on = nil, 0, 0, 0
	j.active.Store(false)
}

// take ends the journals of parts and returns the keys they recorded, each
// once, and whether every one of parts was journaled for hand-off id
// (otherwise the caller reads the whole partitions).
func (j *journal) take(parts []uint32, id uint64) (keys []string, ok bool) {
	j.mu.Lock()
	detached := j.detach(parts)
	j.mu.Unlock()
	ok = len(detached) == len(parts)
	for _, pj := range detached {
		ok = ok && pj.id == id
	}
	if !ok {
		return nil, false
	}
	seen := map[string]bool{}
	for _, pj := range detached {
		for _, k := range pj.keys {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys, true
}

// end ends the journals of parts, if any.
func (j *journal) end(parts []uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.detach(parts)
}

// detach ends the journals of parts and returns them. The caller holds mu.
func (j *journal) detach(parts []uint32) []*partJournal {
	if j.parts == nil {
		return nil
	}
	var out []*partJournal
	for _, p := range parts {
		if pj := j.parts[p]; pj != nil {
			out = append(out, pj)
			j.n -= len(pj.keys)
			for _, k := range pj.keys {
				j.bytes -= len(k)
			}
			j.on--
			j.parts[p] = nil
		}
	}
	j.active.Store(j.on > 0)
	return out
}
