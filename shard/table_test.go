package shard

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/shardlimit/shardlimit/shard/key"
)

// The table agrees with a Go map through random inserts, updates and
// deletes, including deletes during a sweep-style scan.
func TestTableAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table
	ref := map[key.Key]int64{}
	keys := make([]key.Key, 0, 3000)
	for range 3000 {
		// Few distinct home bits, to force long probe runs and wrap-around.
		keys = append(keys, key.Key{Hi: rng.Uint64() & 0xff000000f0000000, Lo: rng.Uint64() | 1})
	}
	for step := range 60_000 {
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(3) {
		case 0, 1:
			i, ok := tb.find(k)
			var s *slot
			if ok {
				s = &tb.slots[i]
			} else {
				s = tb.insert(k)
			}
			v := int64(step)
			s.setState(v, -v)
			ref[k] = v
		case 2:
			if i, ok := tb.find(k); ok {
				tb.deleteAt(i)
			}
			delete(ref, k)
		}
	}
	check := func() {
		t.Helper()
		if tb.len() != len(ref) {
			t.Fatalf("table holds %d keys, map %d", tb.len(), len(ref))
		}
		for k, v := range ref {
			i, ok := tb.find(k)
			if !ok {
				t.Fatalf("key %v lost", k)
			}
			if a, b := tb.slots[i].state(); a != v || b != -v {
				t.Fatalf("key %v: state %d,%d want %d,%d", k, a, b, v, -v)
			}
		}
	}
	check()
	// Delete every key with an odd state while scanning, as sweep does.
	for i := 0; i < len(tb.slots); {
		s := &tb.slots[i]
		if a, _ := s.state(); !s.empty() && a%2 != 0 {
			delete(ref, s.key())
			tb.deleteAt(i)
			continue
		}
		i++
	}
	check()
}

func TestSlotPacksInto36Bytes(t *testing.T) {
	var s slot
	s.setMeta(maxFresh+5, 7)
	if s.fresh() != maxFresh || s.flags() != 7 {
		t.Fatalf("meta round trip: fresh %d flags %d", s.fresh(), s.flags())
	}
	s.setState(-1, 1<<62+7)
	if a, b := s.state(); a != -1 || b != 1<<62+7 {
		t.Fatalf("state round trip: %d %d", a, b)
	}
}

func TestSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(slot{}); n != slotBytes {
		t.Fatalf("slot is %d bytes, want 36", n)
	}
}

// A table shrinks once its keys fit in half of it, keeping every key, and
// says what its next insert adds.
func TestTableShrinks(t *testing.T) {
	var tb table
	keys := make([]key.Key, 100)
	for i := range keys {
		keys[i] = key.Key{Hi: uint64(i) * 0x9e3779b97f4a7c15, Lo: uint64(i) | 1}
		tb.insert(keys[i]).setState(int64(i), 0)
	}
	if len(tb.slots) != 128 || tb.full() || tb.shrink(1, 2) {
		t.Fatalf("%d slots", len(tb.slots))
	}
	for _, k := range keys[10:] {
		i, _ := tb.find(k)
		tb.deleteAt(i)
	}
	if !tb.shrink(1, 2) || len(tb.slots) != 32 || tb.bytes() != 32*slotBytes {
		t.Fatalf("after deleting 90 of 100: %d slots", len(tb.slots))
	}
	for i, k := range keys[:10] {
		if j, ok := tb.find(k); !ok {
			t.Fatalf("key %d lost", i)
		} else if a, _ := tb.slots[j].state(); a != int64(i) {
			t.Fatalf("key %d holds %d", i, a)
		}
	}
	for range 16 {
		tb.insert(key.Key{Hi: uint64(len(keys)), Lo: 1})
		keys = append(keys, key.Key{})
	}
	if tb.len() != 26 || !tb.full() || tb.grown(0) != 64 || tb.grown(40) != 40 || tb.grown(33) != 32 {
		t.Fatalf("%d keys in %d slots: grows to %d, %d within 40, %d within 33; want 64, 40 and none", tb.len(), len(tb.slots), tb.grown(0), tb.grown(40), tb.grown(33))
	}
	tb.resize(40) // any size
	for i, k := range keys[:10] {
		if _, ok := tb.find(k); !ok {
			t.Fatalf("key %d lost growing to 40 slots", i)
		}
	}
}
