package eviction

import (
	"testing"
)

func TestDecide(t *testing.T) {
	serving := func(id string, created int64) Registered {
		return Registered{ID: id, Addr: id + ":1", Serving: true, Created: created, Lease: created}
	}
	report := func(shard string, rev int64, reaches int) Seen {
		return Seen{Report: Report{Shard: shard, Router: "r" + shard, Reaches: reaches}, Rev: rev}
	}
	three := []Registered{serving("a", 10), serving("b", 20), serving("c", 30)}
	for _, c := range []struct {
		name     string
		reports  []Seen
		members  []Registered
		evicting []string
		want     string // "" for none
	}{
		{"no report", nil, three, nil, ""},
		{"a report after the registration", []Seen{report("b", 25, 1)}, three, nil, "b"},
		{"a report about an earlier registration", []Seen{report("b", 15, 1)}, three, nil, ""},
		{"a router that reaches no other shard", []Seen{report("b", 25, 0)}, three, nil, ""},
		{"another eviction in force", []Seen{report("b", 25, 1)}, three, []string{"a"}, ""},
		{"the last serving member", []Seen{report("b", 25, 1)},
			[]Registered{serving("b", 20), {ID: "a", Created: 10}}, nil, ""},
		{"a joining member is not evicted", []Seen{report("a", 25, 1)},
			[]Registered{{ID: "a", Created: 10}, serving("b", 20), serving("c", 30)}, nil, ""},
		{"a report of no member", []Seen{report("z", 25, 1)}, three, nil, ""},
		{"the most reported first", []Seen{report("a", 40, 1), report("c", 41, 1), report("c", 42, 2)}, three, nil, "c"},
		{"ties by id", []Seen{report("c", 41, 1), report("b", 40, 1)}, three, nil, "b"},
	} {
		v := Decide(c.reports, c.members, c.evicting)
		got := ""
		if v.Evict() {
			got = v.Member.ID
		}
		if got != c.want {
			t.Errorf("%s: evicts %q, want %q", c.name, got, c.want)
		}
	}
}
