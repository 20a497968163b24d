package shard

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardlimit/shardlimit/shard/key"
)

// journal records which keys of the partitions being handed over change
// between a planned hand-off's first copy and its final, fenced one, so
// that the final copy, during which the partitions are decided by nobody
// and their forwarded checks wait, reads only those keys instead of the
// whole partitions.
//
// The decision path appends a batch's keys before the batch ends (before
// ownership's End), so once a fence returns, every change decided before it
// is in the journal. Appending is all it does per check (a key decided
// twice is recorded twice; take removes the repeats), under one lock per
// batch, into blocks that never move. A journal left behind by a hand-off that never made its final
// copy ends when its partitions are fenced or dropped, or when it
// overflows: past maxJournalKeys records it forgets them all and records
// nothing more, and final copies read whole partitions.
type journal struct {
	active atomic.Bool // any partition journaled: the decision path looks
	mu     sync.Mutex
	// journaled marks the partitions journaled, indexed by partition
	// (maxExportPartitions of them once any was).
	journaled []bool
	// changed are the keys recorded, each with its partition, in blocks
	// of journalBlock that are filled and never moved; n counts them.
	changed [][]journaled
	n       int
}

// journalBlock is how many records one block of a journal holds.
const journalBlock = 4096

// journaled is one recorded change.
type journaled struct {
	key       key.Key
	partition uint32
}

// maxJournalKeys bounds the records a journal holds (24 MiB): at the 1M keys
// per second a hand-off streams (BENCHMARKS.md), reading as many keys whole
// costs about a second.
const maxJournalKeys = 1 << 20

// start journals parts afresh.
func (j *journal) start(parts []uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.journaled == nil {
		j.journaled = make([]bool, maxExportPartitions)
	}
	j.remove(parts)
	for _, p := range parts {
		j.journaled[p] = true
	}
	j.active.Store(true)
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
	if j.journaled == nil {
		return // overflowed meanwhile
	}
	for i := range checks {
		c := &checks[i]
		if c.Skip || !j.journaled[c.Partition] {
			continue
		}
		if j.n == maxJournalKeys {
			j.overflow()
			return
		}
		if len(j.changed) == 0 || len(j.changed[len(j.changed)-1]) == journalBlock {
			j.changed = append(j.changed, make([]journaled, 0, journalBlock))
		}
		last := &j.changed[len(j.changed)-1]
		*last = append(*last, journaled{key: c.stored, partition: uint32(c.Partition)})
		j.n++
	}
}

// overflow forgets every journal: their final copies read the whole
// partitions. The caller holds mu.
func (j *journal) overflow() {
	j.journaled, j.changed, j.n = nil, nil, 0
	j.active.Store(false)
}

// take ends the journals of parts and returns the keys they recorded, each
// once, and whether every one of parts was journaled (otherwise the caller
// reads the whole partitions).
func (j *journal) take(parts []uint32) (keys []key.Key, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.journaled == nil {
		return nil, false
	}
	ok = true
	in := make([]bool, len(j.journaled))
	for _, p := range parts {
		ok = ok && j.journaled[p]
		in[p] = true
	}
	seen := map[key.Key]bool{}
	for _, block := range j.changed {
		for _, c := range block {
			if in[c.partition] && !seen[c.key] {
				seen[c.key] = true
				keys = append(keys, c.key)
			}
		}
	}
	j.remove(parts)
	return keys, ok
}

// remove ends the journals of parts and forgets their records. The caller
// holds mu.
func (j *journal) remove(parts []uint32) {
	was := false
	for _, p := range parts {
		was = was || j.journaled[p]
		j.journaled[p] = false
	}
	if was {
		// Keep the others' records, in blocks as full as before.
		var kept [][]journaled
		j.n = 0
		for _, block := range j.changed {
			for _, c := range block {
				if !j.journaled[c.partition] {
					continue
				}
				if len(kept) == 0 || len(kept[len(kept)-1]) == journalBlock {
					kept = append(kept, make([]journaled, 0, journalBlock))
				}
				kept[len(kept)-1] = append(kept[len(kept)-1], c)
				j.n++
			}
		}
		j.changed = kept
	}
	j.active.Store(slices.Contains(j.journaled, true))
}

// end ends the journals of parts, if any.
func (j *journal) end(parts []uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.journaled != nil {
		j.remove(parts)
	}
}
