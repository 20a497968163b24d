package partition_test

import (
	"testing"

	"github.com/shardlimit/shardlimit/shard/member"
	. "github.com/shardlimit/shardlimit/shard/partition"
)

var b = member.Member{ID: "b", Addr: "b:1"}

// The package documentation's table, row by row: every event from the
// states it names, with the state and effects it leads to.
func TestStep(t *testing.T) {
	forwarding := Partition{State: Fenced, To: &b}
	for _, tc := range []struct {
		name string
		from Partition
		e    Event
		want Partition
		fx   Effect
	}{
		// Export side.
		{"first export journals, decides on", Partition{State: Owned}, Event{Kind: FirstExport}, Partition{State: Owned}, StartJournal},
		{"final export fences and forwards", Partition{State: Owned, Pulled: true}, Event{Kind: FinalExport, To: b}, forwarding, ReadJournal},
		{"final export of a whole partition", Partition{State: Owned}, Event{Kind: FinalExport, To: b, Whole: true}, forwarding, EndJournal},
		{"fenced export", Partition{State: Owned, Pulled: true}, Event{Kind: FencedExport}, Partition{State: Fenced}, EndJournal},
		{"fenced export keeps a forward (where the counters are)", forwarding, Event{Kind: FencedExport}, forwarding, EndJournal},
		{"recall a forwarded one", forwarding, Event{Kind: Recall}, Partition{State: Pending, Takers: 1}, TakeOver},
		{"recall leaves others", Partition{State: Fenced}, Event{Kind: Recall}, Partition{State: Fenced}, 0},
		{"final export of one not decided here is refused", Partition{State: Fenced}, Event{Kind: FinalExport, To: b}, Partition{State: Fenced}, Refuse},
		{"drop keeps one decided here (a late drop)", Partition{State: Owned}, Event{Kind: Drop}, Partition{State: Owned}, 0},
		{"fenced export of a pending partition wakes", Partition{State: Pending, Takers: 1}, Event{Kind: FencedExport}, Partition{State: Fenced, Takers: 1}, EndJournal | Wake},
		{"drop", forwarding, Event{Kind: Drop}, Partition{}, EndJournal | ForgetCounters},
		{"drop keeps one whose takeover still merges here (settling)", Partition{State: Fenced, Takers: 1}, Event{Kind: Drop}, Partition{State: Fenced, Takers: 1}, 0},
		// Pull side.
		{"final pull starts", Partition{}, Event{Kind: FinalPullStarts}, Partition{State: Receiving}, 0},
		{"final pull starts: an owned one waits too, held", Partition{State: Owned}, Event{Kind: FinalPullStarts}, Partition{State: Receiving, Held: true}, 0},
		{"final pull starts: pending keeps its takeover", Partition{State: Pending, Takers: 1}, Event{Kind: FinalPullStarts}, Partition{State: Pending, Takers: 1}, 0},
		{"final pulled", Partition{State: Receiving}, Event{Kind: FinalPulled}, Partition{State: Owned, Pulled: true}, Wake},
		{"final pulled: owned stays, pulled", Partition{State: Owned}, Event{Kind: FinalPulled}, Partition{State: Owned, Pulled: true}, 0},
		{"final pulled: a fence meanwhile stays", Partition{State: Fenced}, Event{Kind: FinalPulled}, Partition{State: Fenced}, 0},
		{"final pull failed", Partition{State: Receiving, Pulled: true}, Event{Kind: FinalPullFailed}, Partition{}, Wake},
		{"final pull failed: one held is decided again", Partition{State: Receiving, Held: true, Pulled: true}, Event{Kind: FinalPullFailed}, Partition{State: Owned, Pulled: true}, Wake},
		{"final pulled: a held one", Partition{State: Receiving, Held: true}, Event{Kind: FinalPulled}, Partition{State: Owned, Pulled: true}, Wake},
		{"final pulled: the table moved it from its source to a third shard meanwhile, fenced", Partition{State: Receiving}, Event{Kind: FinalPulled, From: "b", Me: "a", Is: "c"}, Partition{State: Fenced}, Wake},
		{"final pulled: the table names its source", Partition{State: Receiving}, Event{Kind: FinalPulled, From: "b", Me: "a", Is: "b"}, Partition{State: Owned, Pulled: true, From: "b"}, Wake},
		{"final pull failed: others stay", Partition{State: Owned}, Event{Kind: FinalPullFailed}, Partition{State: Owned}, 0},
		{"fenced pulled", Partition{}, Event{Kind: FencedPulled}, Partition{State: Owned, Pulled: true}, 0},
		{"fenced pulled: a fence since keeps it fenced", Partition{State: Fenced}, Event{Kind: FencedPulled}, Partition{State: Fenced}, 0},
		{"fenced pulled into a pending one", Partition{State: Pending, Takers: 1}, Event{Kind: FencedPulled}, Partition{State: Pending, Pulled: true, Takers: 1}, 0},
		{"fenced pulled ahead of the table that gives it here: pulled only", Partition{}, Event{Kind: FencedPulled, From: "b", Me: "a", Is: "c"}, Partition{Pulled: true, From: "b"}, 0},
		{"fenced pulled where no table named an owner yet (a process started within its predecessor's lease): pulled only", Partition{}, Event{Kind: FencedPulled, From: "b", Me: "a", Is: ""}, Partition{Pulled: true, From: "b"}, 0},
		{"fenced pulled where the table gives it here", Partition{}, Event{Kind: FencedPulled, From: "b", Me: "a", Is: "a"}, Partition{State: Owned, Pulled: true, From: "b"}, 0},
		{"fenced pulled while a final copy arrives: left to it", Partition{State: Receiving}, Event{Kind: FencedPulled, From: "b", Me: "a", Is: "a"}, Partition{State: Receiving}, 0},
		// Owner table.
		{"gained after a hand-off", Partition{State: Owned, Pulled: true}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "a"}, Partition{State: Owned}, 0},
		{"gained from nobody", Partition{}, Event{Kind: OwnerChanged, Me: "a", Was: "", Is: "a"}, Partition{State: Owned}, 0},
		{"gained from nobody, forwarded since by a final copy: stays forwarding", forwarding, Event{Kind: OwnerChanged, Me: "a", Was: "", Is: "a"}, forwarding, 0},
		{"gained without a hand-off", Partition{State: Fenced}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "a"}, Partition{State: Pending, Takers: 1}, TakeOver},
		{"gained without a hand-off while forwarding: taken over from where it forwards too", forwarding, Event{Kind: OwnerChanged, Me: "a", Was: "c", Is: "a"}, Partition{State: Pending, Takers: 2}, TakeOver | TakeOverForward},
		{"gained back from the shard it forwards to: one takeover", forwarding, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "a"}, Partition{State: Pending, Takers: 1}, TakeOver},
		{"kept", Partition{State: Owned, Pulled: true}, Event{Kind: OwnerChanged, Me: "a", Was: "a", Is: "a"}, Partition{State: Owned, Pulled: true}, 0},
		{"moved away: still decided", Partition{State: Owned, Pulled: true}, Event{Kind: OwnerChanged, Me: "a", Was: "a", Is: "b"}, Partition{State: Owned}, 0},
		{"moved elsewhere: pulled is stale", Partition{State: Unowned, Pulled: true}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "c"}, Partition{}, 0},
		{"moved elsewhere: decided since a final copy, fenced", Partition{State: Owned, Pulled: true}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "c"}, Partition{State: Fenced}, 0},
		{"moved elsewhere: decided though not pulled (no fence comes), fenced", Partition{State: Owned}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "c"}, Partition{State: Fenced}, 0},
		{"moved elsewhere: being taken over here, fenced (the takeover still ends)", Partition{State: Pending, Takers: 1}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "c"}, Partition{State: Fenced, Takers: 1}, Wake},
		{"moved away while being taken over here, fenced (the takeover still ends)", Partition{State: Pending, Takers: 1}, Event{Kind: OwnerChanged, Me: "a", Was: "a", Is: "b"}, Partition{State: Fenced, Takers: 1}, Wake},
		{"unchanged elsewhere while taken back here stays pending", Partition{State: Pending, Takers: 1}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "b"}, Partition{State: Pending, Takers: 1}, 0},
		{"unchanged elsewhere", Partition{State: Owned, Pulled: true}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "b"}, Partition{State: Owned, Pulled: true}, 0},
		{"takeover ended", Partition{State: Pending, Takers: 1}, Event{Kind: TakeoverEnded}, Partition{State: Owned}, Wake},
		{"takeover ended, another under way", Partition{State: Pending, Takers: 2}, Event{Kind: TakeoverEnded}, Partition{State: Pending, Takers: 1}, Wake},
		{"takeover ended of a fenced one", Partition{State: Fenced, Takers: 1}, Event{Kind: TakeoverEnded}, Partition{State: Fenced}, Wake},
		{"takeover ended, the owner did not answer: swept from the others", Partition{State: Pending, Takers: 1}, Event{Kind: TakeoverEnded, Others: 2}, Partition{State: Pending, Sweeps: 2}, Wake | TakeOver},
		{"takeover ended, the owner did not answer, fenced meanwhile: no sweep", Partition{State: Fenced, Takers: 1}, Event{Kind: TakeoverEnded, Others: 2}, Partition{State: Fenced}, Wake},
		{"a sweep ended, another under way", Partition{State: Pending, Sweeps: 2}, Event{Kind: TakeoverEnded, Sweep: true}, Partition{State: Pending, Sweeps: 1}, Wake},
		{"the last sweep ended", Partition{State: Pending, Sweeps: 1}, Event{Kind: TakeoverEnded, Sweep: true}, Partition{State: Owned}, Wake},
		{"the last sweep ended, a takeover still under way", Partition{State: Pending, Takers: 1, Sweeps: 1}, Event{Kind: TakeoverEnded, Sweep: true}, Partition{State: Pending, Takers: 1}, Wake},
		{"gained again while swept: the sweeps go on", Partition{State: Pending, Sweeps: 1}, Event{Kind: OwnerChanged, Me: "a", Was: "b", Is: "a"}, Partition{State: Pending, Takers: 1, Sweeps: 1}, TakeOver},
		{"reclaim a stuck one", Partition{State: Fenced}, Event{Kind: Reclaim, Takers: 2}, Partition{State: Pending, Takers: 2}, 0},
		{"reclaim leaves a decided one", Partition{State: Owned}, Event{Kind: Reclaim, Takers: 2}, Partition{State: Owned}, 0},
		{"reclaim from nobody decides a stuck one", Partition{State: Fenced}, Event{Kind: Reclaim}, Partition{State: Owned}, Wake},
		{"reclaim from nobody leaves one whose takeover is under way to it", Partition{State: Fenced, Takers: 1}, Event{Kind: Reclaim}, Partition{State: Pending, Takers: 1}, Wake},
		{"reclaim from nobody leaves one whose sweeps are under way to them", Partition{State: Fenced, Sweeps: 2}, Event{Kind: Reclaim}, Partition{State: Pending, Sweeps: 2}, 0},
		{"a fence keeps the sweeps under way", Partition{State: Pending, Sweeps: 2}, Event{Kind: FencedExport}, Partition{State: Fenced, Sweeps: 2}, EndJournal},
	} {
		got, fx := Step(tc.from, tc.e)
		if !same(got, tc.want) || fx != tc.fx {
			t.Errorf("%s: %v from %+v: got %+v, %b; want %+v, %b", tc.name, tc.e.Kind, tc.from, got, fx, tc.want, tc.fx)
		}
	}
}

// same compares partitions by the member they forward to, not its address.
func same(a, b Partition) bool {
	if (a.To == nil) != (b.To == nil) || a.To != nil && *a.To != *b.To {
		return false
	}
	a.To, b.To = nil, nil
	return a == b
}

// Only Owned decides; only a final export forwards, and any other step
// ends the forward.
func TestQueries(t *testing.T) {
	for _, st := range States() {
		p := Partition{State: st, To: &b}
		if p.Decides() != (st == Owned) {
			t.Errorf("%v decides: %v", st, p.Decides())
		}
		if _, ok := p.Forwards(); ok != (st == Fenced) {
			t.Errorf("%v with a next owner forwards: %v", st, ok)
		}
		if p.Settling() != (st == Pending || st == Receiving) || p.Stuck() != (st == Fenced || st == Unowned) {
			t.Errorf("%v: settling %v, stuck %v", st, p.Settling(), p.Stuck())
		}
	}
	// Sweeps alone bring no counters known to be on their way.
	if (Partition{State: Pending, Sweeps: 1}).Settling() || !(Partition{State: Pending, Takers: 1, Sweeps: 1}).Settling() {
		t.Error("a pending partition settles while a takeover, not only sweeps, is under way")
	}
	p, _ := Step(Partition{State: Owned}, Event{Kind: FinalExport, To: b})
	for k := FirstExport; k <= Reclaim; k++ {
		if k == FinalExport {
			continue // forwards to its own To
		}
		q, _ := Step(p, Event{Kind: k, Me: "a", Was: "a", Is: "a"})
		if _, ok := q.Forwards(); ok && k != FirstExport && k != FencedExport && k != FinalPulled && k != FinalPullFailed && k != FencedPulled && k != OwnerChanged && k != TakeoverEnded {
			t.Errorf("%v kept the forward of a partition whose state it changed", k)
		}
		if to, ok := q.Forwards(); ok && (q.State != Fenced || to != b) {
			t.Errorf("%v: forwards to %v from %v", k, to, q.State)
		}
	}
}
