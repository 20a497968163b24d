package episodes

import (
	"math/rand/v2"
	"testing"
)

// TestTableChurn adds and removes records in one stripe against a map,
// through many rebuilds: toggling keys from a pool of 1000 keeps about 500
// live among deleted slots.
func TestTableChurn(t *testing.T) {
	var st stripe
	st.tab.Store(newTable(8))
	want := map[Key]*rec{}
	r := rand.New(rand.NewPCG(5, 6))
	pool := make([]Key, 1000)
	for i := range pool {
		pool[i] = Key{Hi: r.Uint64(), Lo: r.Uint64()}
	}
	for i := range 50000 {
		k := pool[r.IntN(len(pool))]
		if got := st.find(k); got != want[k] {
			t.Fatalf("step %d: find(%v) = %p, want %p", i, k, got, want[k])
		}
		if x := want[k]; x != nil {
			st.remove(x)
			delete(want, k)
		} else {
			x = &rec{key: k}
			st.add(x)
			want[k] = x
		}
		if st.live != len(want) {
			t.Fatalf("step %d: live %d, want %d", i, st.live, len(want))
		}
	}
	n := 0
	st.each(func(x *rec) {
		if want[x.key] != x {
			t.Fatalf("each: stray record %v", x.key)
		}
		n++
	})
	if n != len(want) {
		t.Fatalf("each saw %d of %d", n, len(want))
	}
	if tab := st.tab.Load(); 2*(st.live+st.tombs) > len(tab.slots) {
		t.Fatalf("table over half full: %d live, %d deleted, %d slots", st.live, st.tombs, len(tab.slots))
	}
}
