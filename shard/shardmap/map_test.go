package shardmap

import "testing"

func TestResolvePinsLiveOwnersOnly(t *testing.T) {
	cfg := Config{Partitions: 8, ReplicationFactor: 20, Load: 1.25}
	ms := members(3)
	ring, err := Build(cfg, ms)
	if err != nil {
		t.Fatal(err)
	}
	m := &Map{Version: 2, Partitions: 8, Owners: make([]string, 8)}
	m.Owners[0] = "shard-2"
	m.Owners[1] = "gone"
	got := Resolve(ring, m)
	if o, _ := got.Owner(0); o.ID != "shard-2" {
		t.Fatalf("pinned partition 0 owned by %s", o.ID)
	}
	want, _ := ring.Owner(1)
	if o, _ := got.Owner(1); o.ID != want.ID {
		t.Fatalf("partition pinned to a dead member: %s, want the ring's %s", o.ID, want.ID)
	}
	for p := 2; p < 8; p++ {
		a, _ := got.Owner(p)
		b, _ := ring.Owner(p)
		if a.ID != b.ID {
			t.Fatalf("unpinned partition %d: %s, ring %s", p, a.ID, b.ID)
		}
	}
	// A map for another partition count is ignored, as is no map.
	if Resolve(ring, &Map{Version: 1, Partitions: 4, Owners: make([]string, 4)}) != ring || Resolve(ring, nil) != ring {
		t.Fatal("a mismatched or absent map was applied")
	}
}
