package shardmap

import (
	"strings"
	"testing"

	"github.com/shardlimit/shardlimit/shard/member"
)

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

// Joining and draining members own nothing, and a pin to one falls back to
// the ring, for every caller of the owner function alike.
func TestOnlyServingMembersOwnPartitions(t *testing.T) {
	cfg := Config{Partitions: 64, ReplicationFactor: 20, Load: 1.25}
	ms := members(4)
	ms[1].State = member.Joining
	ms[2].State = member.Draining
	ms[3].State = member.Serving
	m := &Map{Version: 1, Partitions: 64, Owners: make([]string, 64)}
	m.Owners[0], m.Owners[1] = "shard-1", "shard-2"
	got, err := InForce(cfg, ms, m)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := InForce(cfg, []member.Member{ms[0], ms[3]}, nil)
	for p := range 64 {
		a, _ := got.Owner(p)
		b, _ := want.Owner(p)
		if a.ID != b.ID || (a.ID != "shard-0" && a.ID != "shard-3") {
			t.Fatalf("partition %d owned by %s, want %s (the ring over the serving members)", p, a.ID, b.ID)
		}
	}
	if n := len(got.Members()); n != 2 {
		t.Fatalf("table holds %d members, want the 2 serving ones", n)
	}
}

// Validate takes a published map (version 1 on) and the record of the
// partition count (version 0, no pins), and names what does not fit.
func TestValidate(t *testing.T) {
	pinned := make([]string, 4)
	pinned[2] = "shard-1"
	for _, tc := range []struct {
		m    Map
		want string
	}{
		{Map{Version: 0, Partitions: 4, Owners: make([]string, 4)}, ""},
		{Map{Version: 3, Partitions: 4, Owners: pinned}, ""},
		{Map{Version: 0, Partitions: 4, Owners: pinned}, "version: 0 (the partition count's record) pins 1"},
		{Map{Version: -1, Partitions: 4, Owners: make([]string, 4)}, "version: -1"},
		{Map{Version: 1, Partitions: 8, Owners: make([]string, 8)}, "partitions: 8, but 4 are in use"},
		{Map{Version: 1, Partitions: 4, Owners: make([]string, 3)}, "owners: 3 entries"},
	} {
		err := tc.m.Validate(4)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.m, err, tc.want)
		}
	}
}
