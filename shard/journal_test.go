package shard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/limiter"
)

// journalCheck is a check of user in partition.
func journalCheck(user string, partition int, skip bool) BatchCheck {
	return BatchCheck{
		Check:   Check{Service: "s", Rule: "r", User: user, Hits: 1, Partition: partition},
		Limiter: &limiter.Rule{Algorithm: limiter.FixedWindow, Limit: 3, Period: int64(time.Hour)},
		Skip:    skip,
	}
}

// stored returns c's stored key.
func (c *BatchCheck) stored() string {
	return string(storedKey(nil, c.Limiter.Algorithm, c.Service, c.Rule, c.User))
}

// The journal records the changed keys of journaled partitions, and
// nothing else; take returns each once and ends those journals.
func TestJournalRecordsChangedKeysOfJournaledPartitions(t *testing.T) {
	var j journal
	j.record([]BatchCheck{journalCheck("before", 1, false)}) // nothing journaled yet
	j.start([]uint32{1, 2}, 7)
	j.record([]BatchCheck{
		journalCheck("a", 1, false), journalCheck("a", 1, false), journalCheck("b", 2, false),
		journalCheck("c", 3, false),      // not journaled
		journalCheck("skipped", 1, true), // not decided: changed nothing
	})
	keys, ok := j.take([]uint32{1}, 7)
	if !ok || len(keys) != 1 {
		t.Fatalf("partition 1: %v %v, want the one key of a", keys, ok)
	}
	c := journalCheck("a", 1, false)
	if want := c.stored(); keys[0] != want {
		t.Fatalf("recorded %v, want the stored key %v", keys[0], want)
	}
	if _, ok := j.take([]uint32{1}, 7); ok {
		t.Fatal("partition 1 still journaled after take")
	}
	if keys, ok := j.take([]uint32{2, 3}, 7); ok || len(keys) != 0 {
		t.Fatalf("partitions 2 and 3: %v %v, want nothing and not ok (3 was not journaled)", keys, ok)
	}
	if j.active.Load() || j.n != 0 || j.on != 0 {
		t.Fatalf("active %v with %d records after every journal ended", j.active.Load(), j.n)
	}
}

// A final copy reads only the journal its own hand-off started: one left
// behind by an earlier, abandoned hand-off is ended, not read.
func TestJournalOfAnotherHandoffIsNotRead(t *testing.T) {
	var j journal
	j.start([]uint32{1}, 1)
	j.record([]BatchCheck{journalCheck("a", 1, false)})
	if keys, ok := j.take([]uint32{1}, 2); ok || len(keys) != 0 {
		t.Fatalf("took %v %v from hand-off 1's journal for hand-off 2, want nothing", keys, ok)
	}
	if j.active.Load() || j.n != 0 {
		t.Fatal("the abandoned journal was not ended")
	}
}

// Past maxJournalKeys records, or maxJournalBytes of keys (long users),
// the journal forgets everything and stops: the final copy then reads
// whole partitions.
func TestJournalOverflowReadsWholePartitions(t *testing.T) {
	for _, tc := range []struct {
		name string
		pad  string
		n    int
	}{
		{"records", "", maxJournalKeys},
		{"bytes", strings.Repeat("u", 4000), maxJournalBytes / 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j journal
			j.start([]uint32{0}, 1)
			batch := make([]BatchCheck, 0, 4096)
			for i := 0; i <= tc.n; i++ {
				batch = append(batch, journalCheck(tc.pad+fmt.Sprint(i), 0, false))
				if len(batch) == cap(batch) || i == tc.n {
					j.record(batch)
					batch = batch[:0]
				}
			}
			if j.active.Load() || j.n != 0 || j.bytes != 0 || j.on != 0 {
				t.Fatalf("active %v with %d records of %d bytes after overflowing", j.active.Load(), j.n, j.bytes)
			}
			if keys, ok := j.take([]uint32{0}, 1); ok || len(keys) != 0 {
				t.Fatalf("take after overflow: %d keys, ok %v; want none and not ok", len(keys), ok)
			}
		})
	}
}

// exportKeys reads exactly the keys asked for that the store holds.
func TestExportKeys(t *testing.T) {
	now := time.Now().UnixNano()
	s := NewStore(StoreOptions{}, now)
	var want []string
	for _, u := range []string{"a", "b"} {
		c := journalCheck(u, 0, false)
		s.DecideBatch([]BatchCheck{c}, now, 1, make([]limiter.Decision, 1))
		want = append(want, c.stored())
	}
	absent := journalCheck("absent", 0, false)
	got := s.exportKeys(append(slices.Clone(want), absent.stored()), nil)
	if len(got) != 2 || string(got[0].Key) != want[0] || string(got[1].Key) != want[1] || got[0].State.A == 0 && got[0].State.B == 0 {
		t.Fatalf("exported %+v, want the states of %v", got, want)
	}
}

// A partition listed twice is journaled once, so that taking it ends the
// journal; keys merged into a journaled partition are recorded too.
func TestJournalDuplicatesAndImports(t *testing.T) {
	var j journal
	c := journalCheck("a", 0, false)
	e := Exported{Key: []byte(c.stored()), Algo: limiter.FixedWindow}
	p := uint32(e.partition(1024))
	j.start([]uint32{p, p}, 3)
	j.recordImported([]Exported{e}, 1024)
	keys, ok := j.take([]uint32{p}, 3)
	if !ok || len(keys) != 1 || keys[0] != c.stored() {
		t.Fatalf("took %v %v, want the imported key", keys, ok)
	}
	if j.active.Load() || j.on != 0 {
		t.Fatalf("active %v with %d partitions journaled after the take", j.active.Load(), j.on)
	}
}
