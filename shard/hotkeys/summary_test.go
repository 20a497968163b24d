package hotkeys

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// check verifies a summary's invariants: the heap is a min-heap whose
// positions match the entries, every entry is found from its home without
// crossing an empty slot, and the counters add up to the weight observed.
func check(t *testing.T, s *summary) {
	t.Helper()
	var sum uint64
	for p, nd := range s.heap {
		if p > 0 && s.heap[(p-1)/2].count > nd.count {
			t.Fatalf("heap order broken at %d", p)
		}
		if int(s.entries[nd.idx].pos) != p {
			t.Fatalf("entry %d has pos %d, is at %d", nd.idx, s.entries[nd.idx].pos, p)
		}
		sum += nd.count
	}
	if sum > s.n {
		t.Fatalf("counters add up to %d, over the %d observed", sum, s.n)
	}
	if len(s.entries) == cap(s.entries) {
		if least := s.heap[0].count; slices.Max(s.filter) > least || least > s.n/uint64(cap(s.entries)) {
			t.Fatalf("filter up to %d, least counter %d, N/m %d", slices.Max(s.filter), least, s.n/uint64(cap(s.entries)))
		}
	}
	used := 0
	for _, sl := range s.slots {
		if sl.idx != 0 {
			used++
		}
	}
	if used != len(s.entries) {
		t.Fatalf("%d slots used for %d entries", used, len(s.entries))
	}
	mask := len(s.slots) - 1
	for x, e := range s.entries {
		i := s.home(e.key)
		for s.slots[i].key != e.key {
			if s.slots[i].idx == 0 {
				t.Fatalf("entry %d unreachable from its home", x)
			}
			i = (i + 1) & mask
		}
		if int(s.slots[i].idx) != x+1 {
			t.Fatalf("slot of entry %d points at %d", x, s.slots[i].idx-1)
		}
	}
}

// TestSummaryTable drives one summary of 3 counters by hand. The keys'
// filter buckets differ, but e's is a's.
func TestSummaryTable(t *testing.T) {
	a, b, c, d, e := Key{1, 1}, Key{2, 2}, Key{3, 3}, Key{4, 4}, Key{5, 5}
	type want struct {
		key        Key
		count, err uint64
	}
	steps := []struct {
		key    Key
		n      uint64
		want   []want         // every monitored key after the step
		filter map[Key]uint64 // buckets of these keys after the step
	}{
		{a, 5, []want{{a, 5, 0}}, nil},
		{b, 2, []want{{a, 5, 0}, {b, 2, 0}}, nil},
		{c, 1, []want{{a, 5, 0}, {b, 2, 0}, {c, 1, 0}}, nil},
		{a, 1, []want{{a, 6, 0}, {b, 2, 0}, {c, 1, 0}}, nil},
		// full: d's bucket 0 + 3 > c_min 1, so d takes over c's counter,
		// and c's bucket keeps c's 1
		{d, 3, []want{{a, 6, 0}, {b, 2, 0}, {d, 3, 0}}, map[Key]uint64{c: 1, d: 0}},
		// c's bucket 1 + 1 ≤ c_min 2: only the bucket grows
		{c, 1, []want{{a, 6, 0}, {b, 2, 0}, {d, 3, 0}}, map[Key]uint64{c: 2}},
		// now 2 + 1 > 2: c takes over b's counter as 3 with error 2
		{c, 1, []want{{a, 6, 0}, {c, 3, 2}, {d, 3, 0}}, map[Key]uint64{b: 2, c: 2}},
		{e, 1, []want{{a, 6, 0}, {c, 3, 2}, {d, 3, 0}}, map[Key]uint64{a: 1, e: 1}},
		{c, 10, []want{{a, 6, 0}, {c, 13, 2}, {d, 3, 0}}, nil},
	}
	s := newSummary(3)
	for i, st := range steps {
		s.observe(st.key, "s", "r", "u", st.n)
		check(t, &s)
		if len(s.entries) != len(st.want) {
			t.Fatalf("step %d: %d entries, want %d", i, len(s.entries), len(st.want))
		}
		for _, w := range st.want {
			found := false
			for _, e := range s.entries {
				if e.key == w.key {
					found = true
					if got := s.heap[e.pos].count; got != w.count || e.err != w.err {
						t.Fatalf("step %d: key %v count %d err %d, want %d %d", i, w.key, got, e.err, w.count, w.err)
					}
				}
			}
			if !found {
				t.Fatalf("step %d: key %v not monitored", i, w.key)
			}
		}
		for k, want := range st.filter {
			if got := s.filter[s.bucket(k)]; got != want {
				t.Fatalf("step %d: bucket of %v is %d, want %d", i, k, got, want)
			}
		}
	}
	s.reset()
	check(t, &s)
	if len(s.entries) != 0 || slices.Max(s.filter) != 0 {
		t.Fatalf("reset left %d entries", len(s.entries))
	}
}

// TestSummaryChurn checks the invariants through many evictions, with keys
// whose homes collide (equal Lo), so deletion shifts runs back.
func TestSummaryChurn(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := newSummary(16)
	for i := range 20000 {
		k := Key{Hi: r.Uint64N(64), Lo: r.Uint64N(8)}
		s.observe(k, "", "", "", 1+r.Uint64N(3))
		if i%97 == 0 {
			check(t, &s)
		}
	}
	check(t, &s)
}

// TestKeysWithLoZeroSpread fills a summary with keys as the store gives
// them (its 64-bit hash in Hi, Lo 0) and checks that each is found within
// a few slots of its home: a home from Lo alone put every such key in slot
// 0, one probe run that every call scanned.
func TestKeysWithLoZeroSpread(t *testing.T) {
	s := newSummary(256)
	x := uint64(1)
	for i := range 256 {
		x = x*6364136223846793005 + 1442695040888963407
		s.observe(Key{Hi: x}, "svc", "rule", "user", uint64(i+1))
	}
	check(t, &s)
	mask := len(s.slots) - 1
	longest := 0
	for i, sl := range s.slots {
		if sl.idx != 0 {
			longest = max(longest, (i-s.home(sl.key))&mask)
		}
	}
	if longest > 32 {
		t.Fatalf("a key sits %d slots past its home in a half-full table of %d", longest, len(s.slots))
	}
}
