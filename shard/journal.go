package shard

import (
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
// The decision path records a batch's keys before the batch ends (before
// ownership's End), so once a fence returns, every change decided before it
// is in the journal. A journal left behind by a hand-off that never made
// its final copy ends when its partitions are fenced or dropped, or when it
// overflows: past maxJournalKeys it forgets its keys and records nothing
// more, and the final copy reads the whole partitions.
type journal struct {
	active atomic.Bool // any partition journaled: the decision path looks
	mu     sync.Mutex
	// keys of each journaled partition; a partition absent is not
	// journaled.
	keys map[uint32]map[key.Key]struct{}
	n    int // keys held, over all partitions
}

// maxJournalKeys bounds the keys a journal holds: at the 1M keys per second
// a hand-off streams (BENCHMARKS.md), reading them whole costs about a
// second.
const maxJournalKeys = 1 << 20

// start journals parts afresh.
func (j *journal) start(parts []uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.keys == nil {
		j.keys = map[uint32]map[key.Key]struct{}{}
	}
	for _, p := range parts {
		j.n -= len(j.keys[p])
		j.keys[p] = map[key.Key]struct{}{}
	}
	j.active.Store(len(j.keys) > 0)
}

// record notes the keys of the checks decided or refunded in journaled
// partitions. Only on the decision path, before the batch ends.
func (j *journal) record(checks []BatchCheck) {
	if !j.active.Load() {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range checks {
		c := &checks[i]
		if c.Skip {
			continue
		}
		m, ok := j.keys[uint32(c.Partition)]
		if !ok {
			continue
		}
		k := stored(c.key(), c.Limiter.Algorithm)
		if _, ok := m[k]; ok {
			continue
		}
		if j.n == maxJournalKeys {
			j.overflow()
			return
		}
		m[k] = struct{}{}
		j.n++
	}
}

// overflow forgets every journal: their final copies read the whole
// partitions. The caller holds mu.
func (j *journal) overflow() {
	clear(j.keys)
	j.n = 0
	j.active.Store(false)
}

// take ends the journals of parts and returns the keys they recorded, and
// whether every one of parts was journaled (otherwise the caller reads the
// whole partitions).
func (j *journal) take(parts []uint32) (keys []key.Key, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ok = true
	for _, p := range parts {
		m, journaled := j.keys[p]
		ok = ok && journaled
		for k := range m {
			keys = append(keys, k)
		}
		j.n -= len(m)
		delete(j.keys, p)
	}
	j.active.Store(len(j.keys) > 0)
	return keys, ok
}

// end ends the journals of parts, if any.
func (j *journal) end(parts []uint32) { j.take(parts) }
