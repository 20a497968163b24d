package partition_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/shardlimit/shardlimit/shard/partition"
)

// The package documentation's hand-off table: the phases a hand-off of
// two pairs goes through, the copies it asks for, and what it reports,
// for each way its copies and switch can end.
func TestHandOff(t *testing.T) {
	for _, tc := range []struct {
		name        string
		h           HandOff
		firstFailed []int // pairs whose first copy fails
		finalFailed []int
		keys        uint64 // each copy streams
		switchFails bool
		want        string // the phases, each copy phase with its copies
		notHanded   []int
		switched    bool
	}{
		{name: "all copied", h: HandOff{Pairs: 2, Strict: true, Switch: true, Settle: true, Drop: true}, keys: 1,
			want: "copy[journal journal] copy again[final final] switch settle drop(0 1) done", switched: true},
		{name: "strict, a first copy failed: nothing fenced, nothing switched", h: HandOff{Pairs: 2, Strict: true, Switch: true, Settle: true, Drop: true},
			firstFailed: []int{1}, keys: 1, want: "copy[journal journal] done", notHanded: []int{1}},
		{name: "lenient, a first copy failed: that pair's final copy is whole", h: HandOff{Pairs: 2, Switch: true, Settle: true, Drop: true},
			firstFailed: []int{1}, keys: 1, want: "copy[journal journal] copy again[final final-whole] switch settle drop(0 1) done", switched: true},
		{name: "a final copy failed: switched, not dropped, not handed over", h: HandOff{Pairs: 2, Strict: true, Switch: true, Settle: true, Drop: true},
			finalFailed: []int{0}, keys: 1, want: "copy[journal journal] copy again[final final] switch settle drop(1) done", notHanded: []int{0}, switched: true},
		{name: "the switch failed", h: HandOff{Pairs: 2, Strict: true, Switch: true, Settle: true, Drop: true}, finalFailed: []int{0}, switchFails: true,
			want: "copy[journal journal] copy again[final final] switch done", notHanded: []int{0}},
		{name: "no switch: one fenced copy (a give-back)", h: HandOff{Pairs: 2, Fence: true}, firstFailed: []int{0},
			want: "copy[fence fence] done", notHanded: []int{0}},
		{name: "no pair: the switch, no settle", h: HandOff{Switch: true, Strict: true, Settle: true, Drop: true},
			want: "copy[] switch done", switched: true},
		{name: "nothing streamed: no settle", h: HandOff{Pairs: 2, Switch: true, Settle: true, SkipEmptySettle: true, Drop: true},
			want: "copy[journal journal] copy again[final final] switch drop(0 1) done", switched: true},
		{name: "nothing streamed but a copy failed: settles", h: HandOff{Pairs: 2, Switch: true, Settle: true, SkipEmptySettle: true, Drop: true},
			finalFailed: []int{1}, want: "copy[journal journal] copy again[final final] switch settle drop(0) done", notHanded: []int{1}, switched: true},
		{name: "no settle, no drop (a drain)", h: HandOff{Pairs: 2, Switch: true},
			want: "copy[journal journal] copy again[final final] switch done", switched: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			var got []string
			for ph := h.Start(); ph != PhaseDone; {
				switch ph {
				case PhaseCopy, PhaseCopyAgain:
					failed := tc.firstFailed
					if ph == PhaseCopyAgain {
						failed = tc.finalFailed
					}
					var copies []string
					all := false
					for i := range h.Pairs {
						copies = append(copies, copyName(h.Copy(i)))
						all = h.Copied(i, !slices.Contains(failed, i), tc.keys)
					}
					if all != (h.Pairs > 0) {
						t.Fatalf("%s: the last Copied reported %v", ph, all)
					}
					got = append(got, fmt.Sprintf("%s[%s]", ph, strings.Join(copies, " ")))
					ph = h.CopiesEnded()
				case PhaseSwitch:
					got = append(got, string(ph))
					ph = h.SwitchEnded(!tc.switchFails)
				case PhaseSettle:
					got = append(got, string(ph))
					ph = h.SettleEnded()
				case PhaseDrop:
					got = append(got, fmt.Sprintf("drop(%s)", strings.Trim(fmt.Sprint(h.HandedOver()), "[]")))
					ph = h.DropsEnded()
				}
				if len(got) > 10 {
					t.Fatalf("no end: %v", got)
				}
			}
			got = append(got, string(PhaseDone))
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("phases %q, want %q", s, tc.want)
			}
			if !slices.Equal(h.NotHandedOver(), tc.notHanded) || h.Switched() != tc.switched || h.Phase() != PhaseDone {
				t.Errorf("not handed over %v, switched %v, phase %s; want %v, %v, done", h.NotHandedOver(), h.Switched(), h.Phase(), tc.notHanded, tc.switched)
			}
		})
	}
}

func copyName(c Copy) string {
	switch {
	case c.Final && c.Whole:
		return "final-whole"
	case c.Final:
		return "final"
	case c.Fence:
		return "fence"
	case c.Journal:
		return "journal"
	}
	return "?"
}
