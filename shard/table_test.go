package shard

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// testTable returns a table whose keys' hashes are hash(k).
func testTable(hash func([]byte) uint64) (*table, func([]byte) uint64) {
	t := newTable(maphash.MakeSeed())
	if hash == nil {
		hash = func(k []byte) uint64 { return maphash.Bytes(t.seed, k) }
	} else {
		t.testHash = hash
	}
	return &t, hash
}

// The table agrees with a Go map through random inserts, updates and
// deletes, including deletes during a sweep-style scan, with keys whose
// hashes take few values (long probe runs, wrap-around, equal tags with
// different bytes), and its arena holds at most twice the live bytes.
func TestTableAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tb, hash := testTable(func(k []byte) uint64 { return uint64(len(k)%7) << 40 })
	ref := map[string]int64{}
	keys := make([]string, 0, 3000)
	for i := range 3000 {
		keys = append(keys, fmt.Sprintf("\x01k%0*d", rng.IntN(20), i))
	}
	for step := range 60_000 {
		k := []byte(keys[rng.IntN(len(keys))])
		switch rng.IntN(3) {
		case 0, 1:
			i, ok, _ := tb.find(hash(k), k)
			var s *slot
			if ok {
				s = &tb.slots[i]
			} else {
				s = tb.insert(hash(k), k)
			}
			v := int64(step)
			s.setState(v, -v)
			ref[string(k)] = v
		case 2:
			if i, ok, _ := tb.find(hash(k), k); ok {
				tb.deleteAt(i)
			}
			delete(ref, string(k))
		}
	}
	check := func() {
		t.Helper()
		if tb.len() != len(ref) {
			t.Fatalf("table holds %d keys, map %d", tb.len(), len(ref))
		}
		live := 0
		for k, v := range ref {
			live += len(k)
			i, ok, _ := tb.find(hash([]byte(k)), []byte(k))
			if !ok {
				t.Fatalf("key %q lost", k)
			}
			if a, b := tb.slots[i].state(); a != v || b != -v || string(tb.key(i)) != k {
				t.Fatalf("key %q: state %d,%d under %q, want %d,%d", k, a, b, tb.key(i), v, -v)
			}
		}
		if len(tb.keys) != live+tb.dead || tb.dead > max(live, minDeadBytes) {
			t.Fatalf("arena of %d bytes, %d dead, for %d live", len(tb.keys), tb.dead, live)
		}
	}
	check()
	// Delete every key with an odd state while scanning, as sweep does.
	for i := 0; i < len(tb.slots); {
		s := &tb.slots[i]
		if a, _ := s.state(); !s.empty() && a%2 != 0 {
			delete(ref, string(tb.key(i)))
			tb.deleteAt(i)
			continue
		}
		i++
	}
	check()
}

// Keys whose hashes place them all on one home under the table's first
// salt (an attacker who knew it) are spread by a rehash under a new salt
// once an insert probes past maxProbe: every key is then found within the
// bound, and each keeps its state.
func TestTableRehashesPastProbeBound(t *testing.T) {
	const n = 4000
	inv := uint64(0x9e3779b97f4a7c15) // its inverse mod 2^64, so that tagOf(h_i) is one value
	for range 6 {
		inv *= 2 - 0x9e3779b97f4a7c15*inv
	}
	hashes := map[string]uint64{}
	tb, hash := testTable(func(k []byte) uint64 { return hashes[string(k)] })
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "\x01u%d", i)
		hashes[string(keys[i])] = (0x1234<<32 | uint64(i)) * inv
		if tb.rehashes == 0 && tb.tagOf(hash(keys[i])) != 0x1234 {
			t.Fatal("the crafted hashes do not share a tag under salt 0")
		}
		tb.insert(hash(keys[i]), keys[i]).setState(int64(i), 0)
	}
	if tb.rehashes == 0 {
		t.Fatal("no rehash after inserts that probed past the bound")
	}
	for i, k := range keys {
		j, ok, probes := tb.find(hash(k), k)
		if a, _ := tb.slots[j].state(); !ok || a != int64(i) {
			t.Fatalf("key %d: found %v, state %d", i, ok, a)
		}
		if probes > maxProbe {
			t.Fatalf("key %d: %d probes past its home after %d rehashes, over the bound %d", i, probes, tb.rehashes, maxProbe)
		}
	}
}

// Keys whose hashes are all equal (which only the process's secret seed
// could give) cannot be spread: every key is still found and kept, and the
// rehashes stay amortized, at most one per n/8 inserts.
func TestTableEqualHashesStayCorrect(t *testing.T) {
	const n = 3000
	tb, hash := testTable(func([]byte) uint64 { return 42 })
	for i := range n {
		k := fmt.Appendf(nil, "\x01u%d", i)
		tb.insert(hash(k), k).setState(int64(i), 0)
	}
	for i := range n {
		k := fmt.Appendf(nil, "\x01u%d", i)
		if j, ok, _ := tb.find(hash(k), k); !ok || tb.slots[j].a0 != uint32(i) {
			t.Fatalf("key %d lost", i)
		}
	}
	if tb.rehashes > 30 {
		t.Fatalf("%d rehashes for %d inserts: not amortized", tb.rehashes, n)
	}
}

// Random keys at the table's fullest (13/16) stay well within the probe
// bound without a rehash, in a stripe's table at 10M keys.
func TestTableProbesStayShort(t *testing.T) {
	tb, hash := testTable(nil)
	tb.resize(1 << 16) // a stripe's table at 10M keys
	n := 0
	for ; !tb.full(); n++ {
		k := fmt.Appendf(nil, "\x01svc\x00r\x00user-%d", n)
		tb.insert(hash(k), k)
	}
	longest := 0
	for i := range tb.slots {
		if !tb.slots[i].empty() {
			_, _, p := tb.find(hash(tb.key(i)), tb.key(i))
			longest = max(longest, p)
		}
	}
	if longest > maxProbe || tb.rehashes != 0 {
		t.Fatalf("%d keys in %d slots: longest probe %d, %d rehashes", n, len(tb.slots), longest, tb.rehashes)
	}
	t.Logf("%d keys in %d slots: longest probe %d", n, len(tb.slots), longest)
}

func TestSlotPacksInto32Bytes(t *testing.T) {
	var s slot
	s.setMeta(maxFresh+5, 7)
	if s.fresh() != maxFresh || s.flags() != 7 {
		t.Fatalf("meta round trip: fresh %d flags %d", s.fresh(), s.flags())
	}
	s.setState(-1, 1<<62+7)
	if a, b := s.state(); a != -1 || b != 1<<62+7 {
		t.Fatalf("state round trip: %d %d", a, b)
	}
	if n := unsafe.Sizeof(slot{}); n != slotBytes {
		t.Fatalf("slot is %d bytes, want %d", n, slotBytes)
	}
}

// A stripe is 256 bytes, so that its padding keeps stripes' locks on
// separate cache lines.
func TestStripeIs256Bytes(t *testing.T) {
	if n := unsafe.Sizeof(stripe{}); n != 256 {
		t.Fatalf("stripe is %d bytes, want 256", n)
	}
}

// A table shrinks once its keys fit in half of it, keeping every key, and
// says what its next insert adds.
func TestTableShrinks(t *testing.T) {
	tb, hash := testTable(nil)
	key := func(i int) []byte { return fmt.Appendf(nil, "\x01k%d", i) }
	for i := range 100 {
		tb.insert(hash(key(i)), key(i)).setState(int64(i), 0)
	}
	if len(tb.slots) != 128 || tb.full() || tb.shrink(1, 2) {
		t.Fatalf("%d slots", len(tb.slots))
	}
	for i := 10; i < 100; i++ {
		j, _, _ := tb.find(hash(key(i)), key(i))
		tb.deleteAt(j)
	}
	if !tb.shrink(1, 2) || len(tb.slots) != 32 || tb.bytes() != 32*slotBytes+int64(cap(tb.keys)) {
		t.Fatalf("after deleting 90 of 100: %d slots", len(tb.slots))
	}
	found := func(when string) {
		t.Helper()
		for i := range 10 {
			if j, ok, _ := tb.find(hash(key(i)), key(i)); !ok {
				t.Fatalf("key %d lost %s", i, when)
			} else if a, _ := tb.slots[j].state(); a != int64(i) {
				t.Fatalf("key %d holds %d %s", i, a, when)
			}
		}
	}
	found("shrinking")
	for i := 100; i < 116; i++ {
		tb.insert(hash(key(i)), key(i))
	}
	if tb.len() != 26 || !tb.full() || tb.grown(0) != 64 || tb.grown(40) != 40 || tb.grown(33) != 32 {
		t.Fatalf("%d keys in %d slots: grows to %d, %d within 40, %d within 33; want 64, 40 and none", tb.len(), len(tb.slots), tb.grown(0), tb.grown(40), tb.grown(33))
	}
	tb.resize(40) // any size
	found("growing to 40 slots")
}
