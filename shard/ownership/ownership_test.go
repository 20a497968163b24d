package ownership_test

import (
	"context"
	"slices"
	"testing"

	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/ownership"
	"github.com/shardlimit/shardlimit/shard/partition"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

const partitions = 64

func table(t *testing.T, ids ...string) *shardmap.Table {
	t.Helper()
	var ms []member.Member
	for _, id := range ids {
		ms = append(ms, member.Member{ID: id, Addr: id + ":1", State: member.Serving})
	}
	cfg := shardmap.DefaultConfig()
	cfg.Partitions = partitions
	tb, err := shardmap.Build(cfg, ms)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// ev is an event of kind k.
func ev(k partition.Kind) partition.Event { return partition.Event{Kind: k} }

// decided returns the partitions s decides.
func decided(s *ownership.Set) []uint32 {
	var out []uint32
	s.Begin()
	defer s.End()
	for p := range uint32(partitions) {
		if s.Decides(p) {
			out = append(out, p)
		}
	}
	return out
}

// The cluster's first shard owns every partition from nobody: it decides
// them all at once, with no takeover.
func TestFirstShardOwnsEverythingFromNobody(t *testing.T) {
	s := ownership.New(partitions)
	if got := s.Apply("a", table(t), table(t, "a")); got != nil {
		t.Fatalf("takeovers %v, want none", got)
	}
	if n := s.Count()[partition.Owned]; n != partitions {
		t.Fatalf("%d owned, want %d", n, partitions)
	}
}

// The first table a shard sees changes nothing: its join decides.
func TestFirstTableChangesNothing(t *testing.T) {
	s := ownership.New(partitions)
	if got := s.Apply("a", nil, table(t, "a", "b")); got != nil || len(decided(s)) != 0 {
		t.Fatalf("takeovers %v, decided %v; want nothing", got, decided(s))
	}
}

// A partition a hand-off brought ahead of the switch is decided at once,
// and its switch starts no takeover; one gained without a hand-off from a
// member that vanished is pending until its takeover settles, and the
// takeover names the member's last known address.
func TestGainedWithoutHandOffIsPendingUntilSettled(t *testing.T) {
	abc, ab := table(t, "a", "b", "c"), table(t, "a", "b")
	s := ownership.New(partitions)
	s.Step(abc.PartitionsOf("a"), ev(partition.FencedPulled))
	if got := s.Apply("a", table(t, "b", "c"), abc); got != nil {
		t.Fatalf("join after a hand-off: takeovers %v, want none", got)
	}
	if got, want := decided(s), abc.PartitionsOf("a"); !slices.Equal(got, want) {
		t.Fatalf("decided %v, want %v", got, want)
	}
	// c vanishes: a gains some of its partitions without a hand-off.
	got := s.Apply("a", abc, ab)
	var gained []uint32
	for _, p := range ab.PartitionsOf("a") {
		if !slices.Contains(abc.PartitionsOf("a"), p) {
			gained = append(gained, p)
		}
	}
	if len(gained) == 0 {
		t.Fatal("a gains nothing when c leaves; pick other ids")
	}
	var fromC []uint32
	for _, tk := range got {
		if tk.From.ID == "c" {
			if tk.From.Addr != "c:1" {
				t.Errorf("takeover from c at %q, want its last known address c:1", tk.From.Addr)
			}
			fromC = tk.Partitions
		}
	}
	var all []uint32
	for _, tk := range got {
		all = append(all, tk.Partitions...)
	}
	slices.Sort(all)
	if !slices.Equal(all, gained) || len(fromC) == 0 {
		t.Fatalf("takeovers %v, want the partitions a gained, %v", got, gained)
	}
	for _, p := range gained {
		if st := s.State(int(p)); st != partition.Pending {
			t.Fatalf("partition %d is %v, want pending", p, st)
		}
	}
	if got, want := decided(s), abc.PartitionsOf("a"); !slices.Equal(got, want) {
		t.Fatalf("while pending: decided %v, want only what a owned before, %v", got, want)
	}
	s.Step(all, ev(partition.TakeoverEnded))
	if got, want := decided(s), ab.PartitionsOf("a"); !slices.Equal(got, want) {
		t.Fatalf("settled: decided %v, want %v", got, want)
	}
}

// A pull into a pending partition leaves it pending: only its own
// takeover settles it.
func TestPullDoesNotSettleAPendingPartition(t *testing.T) {
	s := ownership.New(partitions)
	s.Apply("a", table(t, "a", "b"), table(t, "a"))
	p := table(t, "a", "b").PartitionsOf("b")[0]
	s.Step([]uint32{p}, ev(partition.FencedPulled))
	if st := s.State(int(p)); st != partition.Pending {
		t.Fatalf("partition %d is %v after a pull, want pending", p, st)
	}
}

// A partition moved away stays decided (routers that have not switched)
// until it is fenced, and a drop then forgets it; a drop of one still
// decided (a late drop of a partition that came back) keeps it; a fenced
// one is decided again only after a hand-off brings it back.
func TestMovedAwayDecidedUntilDroppedOrFenced(t *testing.T) {
	ab, a := table(t, "a", "b"), table(t, "a")
	s := ownership.New(partitions)
	s.Apply("a", table(t), a) // a alone: owns everything
	s.Apply("a", a, ab)       // b joins
	if n := len(decided(s)); n != partitions {
		t.Fatalf("after b joined: %d decided, want %d until dropped", n, partitions)
	}
	toB := ab.PartitionsOf("b")
	s.Step(toB[:1], ev(partition.Drop))
	if !slices.Contains(decided(s), toB[0]) {
		t.Fatalf("partition %d, decided here, was dropped", toB[0])
	}
	s.Step(toB, ev(partition.FencedExport))
	s.Step(toB[:1], ev(partition.Drop))
	if st := s.State(int(toB[0])); st != partition.Unowned {
		t.Fatalf("partition %d fenced then dropped is %v, want unowned", toB[0], st)
	}
	if got, want := decided(s), ab.PartitionsOf("a"); !slices.Equal(got, want) {
		t.Fatalf("decided %v, want %v", got, want)
	}
	if st := s.State(int(toB[1])); st != partition.Fenced {
		t.Fatalf("partition %d is %v, want fenced", toB[1], st)
	}
	s.Step(toB[1:2], ev(partition.FencedPulled))
	if slices.Contains(decided(s), toB[1]) {
		t.Fatalf("partition %d decided after a fenced copy older than its fence", toB[1])
	}
	s.Step(toB[1:2], ev(partition.FinalPullStarts))
	s.Step(toB[1:2], ev(partition.FinalPulled))
	if !slices.Contains(decided(s), toB[1]) {
		t.Fatalf("partition %d not decided after a hand-off brought it back", toB[1])
	}
}

// Fence waits for the batches in flight: once it returns, no batch that
// began before it still decides.
func TestFenceWaitsForBatchesInFlight(t *testing.T) {
	s := ownership.New(partitions)
	s.Step([]uint32{1}, ev(partition.FencedPulled))
	s.Begin()
	fenced := make(chan struct{})
	go func() {
		s.Step([]uint32{1}, ev(partition.FencedExport))
		close(fenced)
	}()
	// Fence cannot return while the batch holds Begin; the batch keeps
	// its partition whatever Fence has done so far.
	select {
	case <-fenced:
		t.Fatal("Fence returned while a batch was deciding")
	default:
	}
	if !s.Decides(1) {
		t.Fatal("the batch in flight lost its partition")
	}
	s.End()
	<-fenced
	if slices.Contains(decided(s), 1) {
		t.Fatal("partition 1 decided after Fence")
	}
}

// WaitSettled returns once the partitions are no longer pending, or false
// when ctx ends first.
func TestWaitSettled(t *testing.T) {
	s := ownership.New(partitions)
	got := s.Apply("a", table(t, "a", "b"), table(t, "a"))
	if len(got) != 1 {
		t.Fatalf("takeovers %v, want one, from b", got)
	}
	parts := got[0].Partitions
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s.WaitSettled(ctx, parts) {
		t.Fatal("settled while pending")
	}
	done := make(chan bool)
	go func() { done <- s.WaitSettled(context.Background(), parts) }()
	s.Step(parts, ev(partition.TakeoverEnded))
	if !<-done {
		t.Fatal("not settled after Settle")
	}
}

// A nil Set decides every partition (a shard built without a cluster).
func TestNilSetDecidesEverything(t *testing.T) {
	var s *ownership.Set
	s.Begin()
	defer s.End()
	for p := range uint32(partitions) {
		if !s.Decides(p) {
			t.Fatalf("partition %d not decided", p)
		}
	}
}

// A partition whose owner changed twice without a hand-off (b leaves, c
// takes it, c leaves) waits for both takeovers.
func TestPendingWaitsForEveryTakeover(t *testing.T) {
	s := ownership.New(partitions)
	ab, a := table(t, "a", "b"), table(t, "a")
	first := s.Apply("a", ab, a)
	second := s.Apply("a", ab, a) // the same gain seen again, from a table that flapped
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("takeovers %v then %v, want one each", first, second)
	}
	p := first[0].Partitions[0]
	s.Step(first[0].Partitions, ev(partition.TakeoverEnded))
	if st := s.State(int(p)); st != partition.Pending {
		t.Fatalf("partition %d is %v with a takeover still under way, want pending", p, st)
	}
	s.Step(second[0].Partitions, ev(partition.TakeoverEnded))
	if st := s.State(int(p)); st != partition.Owned {
		t.Fatalf("partition %d is %v once both settled, want owned", p, st)
	}
}

// Stuck finds the partitions given to this shard that it neither decides
// nor takes over; Reclaim makes them pending for that many takeovers.
func TestStuckAndReclaim(t *testing.T) {
	s := ownership.New(partitions)
	s.Step([]uint32{1, 2}, ev(partition.FencedPulled))
	s.Step([]uint32{2}, ev(partition.FencedExport))
	if got := s.Stuck([]uint32{1, 2, 3}); !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("stuck %v, want [2 3]", got)
	}
	if got := s.Reclaim([]uint32{1, 2, 3}, 2); !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("reclaimed %v, want [2 3]", got)
	}
	s.Step([]uint32{2, 3}, ev(partition.TakeoverEnded))
	if st := s.State(2); st != partition.Pending {
		t.Fatalf("partition 2 is %v after one of two takeovers, want pending", st)
	}
	s.Step([]uint32{2, 3}, ev(partition.TakeoverEnded))
	if got := decided(s); !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("decided %v, want [1 2 3]", got)
	}
}

// fencedSet returns a set whose partitions forward are fenced by a
// planned hand-off's final copy, forwarding to to, and whose partitions
// plain are fenced by a takeover, forwarding nowhere; both were decided
// here before.
func fencedSet(forward []uint32, to member.Member, plain []uint32) *ownership.Set {
	s := ownership.New(partitions)
	s.Step(append(slices.Clone(forward), plain...), ev(partition.FencedPulled))
	s.Step(forward, partition.Event{Kind: partition.FinalExport, To: to})
	s.Step(plain, ev(partition.FencedExport))
	return s
}

// A partition fenced for a planned hand-off forwards to its next owner
// until any other change of state; a plain fence forwards nowhere.
func TestFenceForwardUntilStateChanges(t *testing.T) {
	to := member.Member{ID: "b", Addr: "b:1"}
	s := fencedSet([]uint32{1, 2}, to, []uint32{3})
	forwards := func() map[uint32]string {
		s.Begin()
		defer s.End()
		out := map[uint32]string{}
		for p := range uint32(partitions) {
			if m, ok := s.ForwardTo(p); ok {
				out[p] = m.ID
			}
		}
		return out
	}
	if got := forwards(); len(got) != 2 || got[1] != "b" || got[2] != "b" {
		t.Fatalf("forwards %v, want 1 and 2 to b", got)
	}
	if got := s.ForwardTargets([]uint32{1, 2, 3}); len(got) != 1 || got[0] != to {
		t.Fatalf("forward targets %v, want [b] once", got)
	}
	if got := decided(s); len(got) != 0 {
		t.Fatalf("decides %v while fenced", got)
	}
	s.Step([]uint32{1}, ev(partition.Drop))
	s.Step([]uint32{2}, ev(partition.FencedPulled)) // older than the fence: no change
	if got := forwards(); len(got) != 1 {
		t.Fatalf("forwards %v after a stale fenced copy, want partition 2 still", got)
	}
	s.Reclaim([]uint32{2}, 1)
	s.Step([]uint32{2}, ev(partition.TakeoverEnded))
	if got := forwards(); len(got) != 0 {
		t.Fatalf("forwards %v after a drop and a takeover, want none", got)
	}
	if got := decided(s); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("decides %v, want [2]", got)
	}
}

// A partition whose final copy is arriving is not decided, and
// WaitSettled waits for it until Pulled; Receive leaves a Pending
// partition to its takeover.
func TestReceivingUntilPulled(t *testing.T) {
	s := ownership.New(partitions)
	s.Step([]uint32{5}, ev(partition.FencedPulled))
	s.Step([]uint32{5, 6}, ev(partition.FinalPullStarts))
	if got := decided(s); len(got) != 0 {
		t.Fatalf("decides %v while receiving", got)
	}
	if st := s.State(5); st != partition.Receiving {
		t.Fatalf("state %v, want receiving", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s.WaitSettled(ctx, []uint32{5}) {
		t.Fatal("settled while receiving")
	}
	done := make(chan bool)
	go func() { done <- s.WaitSettled(context.Background(), []uint32{5, 6}) }()
	s.Step([]uint32{5, 6}, ev(partition.FencedPulled)) // a give-back's copy leaves them to the final copy
	if st := s.State(5); st != partition.Receiving {
		t.Fatalf("state %v after a fenced copy while receiving, want receiving", st)
	}
	s.Step([]uint32{5, 6}, ev(partition.FinalPulled))
	if !<-done {
		t.Fatal("not settled after Pulled")
	}
	if got := decided(s); !slices.Equal(got, []uint32{5, 6}) {
		t.Fatalf("decides %v, want [5 6]", got)
	}

	// A final copy that failed: not decided, not pulled, so that the
	// table giving it here takes it over.
	s.Step([]uint32{7}, ev(partition.FinalPullStarts))
	s.Step([]uint32{7}, ev(partition.FinalPullFailed))
	if st := s.State(7); st != partition.Unowned {
		t.Fatalf("state %v after a failed final copy, want unowned", st)
	}

	tk := s.Apply("a", table(t, "a", "b"), table(t, "a"))
	pending := tk[0].Partitions[0]
	s.Step([]uint32{pending}, ev(partition.FinalPullStarts))
	if st := s.State(int(pending)); st != partition.Pending {
		t.Fatalf("a pending partition became %v on Receive, want pending", st)
	}
}

// A plain fence over a forward keeps it (its counters are there: an
// export recalls them first), and a takeover ends it; Received promotes
// only what is still Receiving (not a partition fenced meanwhile); a
// partition leaving Receiving by any change wakes WaitSettled.
func TestFenceEndsForwardAndReceivedKeepsAFence(t *testing.T) {
	s := ownership.New(partitions)
	s.Step([]uint32{1}, ev(partition.FencedPulled))
	s.Step([]uint32{1}, partition.Event{Kind: partition.FinalExport, To: member.Member{ID: "b", Addr: "b:1"}})
	s.Step([]uint32{1}, ev(partition.FencedExport))
	s.Begin()
	_, fwd := s.ForwardTo(1)
	s.End()
	if !fwd {
		t.Fatal("a plain fence over a forward forgot where the counters are")
	}
	if tk := s.Recall([]uint32{1}, "c"); len(tk) != 1 || tk[0].From.ID != "b" {
		t.Fatalf("recall: %v, want partition 1 taken back from b", tk)
	}
	s.Step([]uint32{1}, ev(partition.TakeoverEnded))
	s.Begin()
	_, fwd = s.ForwardTo(1)
	decides := s.Decides(1)
	s.End()
	if fwd || !decides {
		t.Fatalf("after its recall, partition 1 forwards %v, decided %v; want decided here", fwd, decides)
	}

	s.Step([]uint32{2}, ev(partition.FinalPullStarts))
	done := make(chan bool)
	go func() { done <- s.WaitSettled(context.Background(), []uint32{2}) }()
	s.Step([]uint32{2}, ev(partition.FencedExport)) // the shard lost its lease while the copy arrived
	if !<-done {
		t.Fatal("WaitSettled not woken when a receiving partition was fenced")
	}
	s.Step([]uint32{2}, ev(partition.FinalPulled))
	if st := s.State(2); st != partition.Fenced {
		t.Fatalf("state %v after the copy arrived, want it still fenced", st)
	}
}

// What a hand-off pulled here ahead of a switch that went elsewhere is
// stale: the owner table giving the partition here later takes it over.
func TestPulledForgottenWhenMovedElsewhere(t *testing.T) {
	s := ownership.New(partitions)
	ab, ac := table(t, "a", "b"), table(t, "a", "c")
	p := movedFromBToC(t, ab, ac)
	s.Step([]uint32{uint32(p)}, ev(partition.FinalPullStarts))
	s.Step([]uint32{uint32(p)}, ev(partition.FinalPulled)) // arrived from b; b's switch to "a" never came
	s.Apply("a", ab, ac)                                   // b went, and its partition p to c, not here
	s.Apply("a", ac, table(t, "a"))
	if st := s.State(p); st != partition.Pending {
		t.Fatalf("state %v when the table gave p here from c, want pending (taken over from c)", st)
	}
}

// A partition fenced by a final copy whose switch did not come (it
// forwards to d, which holds its counters and decides it) that a table
// then gives here from a third shard is taken over from both: d stops
// deciding it, and its counters come back (seed 13380 of the simulation).
func TestGainedWhileForwardingTakesOverFromTheForwardToo(t *testing.T) {
	s := ownership.New(partitions)
	s.Step([]uint32{3}, ev(partition.FencedPulled))
	s.Step([]uint32{3}, partition.Event{Kind: partition.FinalExport, To: member.Member{ID: "d", Addr: "d:1"}})
	tks := s.Apply("a", table(t, "c"), table(t, "a"))
	var fromD []uint32
	for _, tk := range tks {
		if tk.From.ID == "d" {
			fromD = tk.Partitions
		}
	}
	if !slices.Equal(fromD, []uint32{3}) {
		t.Fatalf("takeovers %v: want partition 3 taken over from d, where it forwarded", tks)
	}
	s.Step([]uint32{3}, ev(partition.TakeoverEnded))
	if st := s.State(3); st != partition.Pending {
		t.Fatalf("state %v after one of its two takeovers, want pending", st)
	}
	s.Step([]uint32{3}, ev(partition.TakeoverEnded))
	if st := s.State(3); st != partition.Owned {
		t.Fatalf("state %v after both takeovers, want owned", st)
	}
}

// A taker's fenced pull fences at once what is decided here, and what is
// being taken over here (decided once its takeover ends, perhaps after
// the taker gave up), keeping that takeover under way: its export waits
// for it. A partition receiving a final copy is left to settle.
func TestFenceDecidedFencesWhatIsOrWillBeDecided(t *testing.T) {
	s := ownership.New(partitions)
	s.Step([]uint32{1, 2}, ev(partition.FencedPulled))
	tks := s.Apply("a", table(t, "b"), table(t, "a")) // 1 and 2 pulled here: owned; the others taken over from b
	pending := tks[0].Partitions[0]
	s.Step([]uint32{2}, ev(partition.FinalPullStarts)) // a final copy arriving
	fx := s.FenceDecided([]uint32{1, 2, pending}, member.Member{})
	if got := fx.Of(partition.EndJournal); !slices.Equal(got, []uint32{1, pending}) {
		t.Fatalf("fenced %v (their journals ended), want [1 %d]", got, pending)
	}
	if s.State(1) != partition.Fenced || s.State(2) != partition.Receiving || s.State(int(pending)) != partition.Fenced {
		t.Fatalf("states %v %v %v, want fenced, receiving, fenced", s.State(1), s.State(2), s.State(int(pending)))
	}
	if !s.Settling([]uint32{pending}) {
		t.Fatal("the fenced one's takeover is not under way any more: its export would not wait for its counters")
	}
	s.Step([]uint32{pending}, ev(partition.TakeoverEnded))
	if s.State(int(pending)) != partition.Fenced {
		t.Fatalf("%v once its takeover ended, want fenced", s.State(int(pending)))
	}
}

// A partition that a taker's fenced pull asked for, being taken over
// here as the pull arrived, is fenced at once and stays fenced once its
// takeover ends; one that a step makes decided while the pull waits (a
// Reclaim's takeover, begun after the pull arrived, ending) is fenced by
// that step: the taker may give up waiting and decide it from what
// arrived, and this shard must not decide it then (the review of
// FenceDecided: it fenced only what was decided as the pull arrived). Two
// pulls waiting for it fence it until both end; once they have, it is
// decided again as its steps say.
func TestFenceDecidedFencesWhatBecomesDecidedWhileThePullWaits(t *testing.T) {
	s := ownership.New(partitions)
	tks := s.Apply("a", table(t, "b"), table(t, "a")) // every partition taken over from b
	p := tks[0].Partitions[0]
	parts := []uint32{p}
	if got := s.FenceDecided(parts, member.Member{}).Of(partition.EndJournal); !slices.Equal(got, parts) {
		t.Fatalf("effects EndJournal on %v, want %v (fenced while being taken over)", got, parts)
	}
	s.FenceDecided(parts, member.Member{})
	s.Step(parts, ev(partition.TakeoverEnded)) // its takeover ends while the pulls wait
	if st := s.State(int(p)); st != partition.Fenced || len(decided(s)) != 0 {
		t.Fatalf("state %v once its takeover ended while fenced pulls wait, want fenced (decided: %v)", st, decided(s))
	}
	s.FenceEnded(parts)
	s.Reclaim(parts, 1)
	s.Step(parts, ev(partition.TakeoverEnded))
	if st := s.State(int(p)); st != partition.Fenced {
		t.Fatalf("state %v with one pull still waiting, want fenced", st)
	}
	s.FenceEnded(parts)
	s.Reclaim(parts, 1)
	s.Step(parts, ev(partition.TakeoverEnded))
	if st := s.State(int(p)); st != partition.Owned {
		t.Fatalf("state %v once the pulls ended, want owned", st)
	}
}

// A table that makes a partition decided here while a taker's fenced pull
// for it waits (this shard's table catching up: ownership's Behind) does
// not make it decided: it is fenced at once.
func TestFenceDecidedFencesWhatATableMakesDecided(t *testing.T) {
	s := ownership.New(partitions)
	s.Apply("a", nil, table(t, "b"))
	s.Step([]uint32{4}, partition.Event{Kind: partition.FencedPulled, From: "b", Me: "a"}) // pulled here ahead of the table
	s.FenceDecided([]uint32{4}, member.Member{})
	s.Apply("a", table(t, "b"), table(t, "a"))
	if st := s.State(4); st != partition.Fenced {
		t.Fatalf("state %v once the table gave it here while a fenced pull waits, want fenced", st)
	}
	s.FenceEnded([]uint32{4})
}

// A give-back that came while out (to a process restarted at the address
// of a record the giver's table named) marked a partition pulled from b;
// registered, the shard cannot tell whether b decided it since, so a
// table moving it here from b takes it over from b (seed 38044 of the
// simulation: it was decided here at once, beside b).
func TestEnterForgetsWhatWasPulledWhileOut(t *testing.T) {
	s := ownership.New(partitions)
	s.Leave()
	s.Apply("a", nil, table(t, "b"))
	s.Step([]uint32{5}, partition.Event{Kind: partition.FencedPulled, From: "b", Me: "a"})
	s.Enter()
	s.Apply("a", table(t, "b"), table(t, "b"))
	s.Apply("a", table(t, "b"), table(t, "a"))
	if st := s.State(5); st != partition.Pending {
		t.Fatalf("state %v once a table gave it here from b, want pending (taken over from b)", st)
	}
}

func TestSuspendStopsEveryDecisionUntilResume(t *testing.T) {
	s := ownership.New(4)
	s.Step([]uint32{0, 1, 2, 3}, ev(partition.FencedPulled))
	if got := decided(s); len(got) != 4 {
		t.Fatalf("decided %v before suspending, want all 4", got)
	}
	if !s.Suspend() || s.Suspend() {
		t.Error("Suspend reports whether it changed anything")
	}
	if got := decided(s); len(got) != 0 || !s.Suspended() {
		t.Errorf("decided %v while suspended, want none", got)
	}
	if !s.Resume() || s.Resume() {
		t.Error("Resume reports whether it changed anything")
	}
	if got := decided(s); len(got) != 4 {
		t.Errorf("decided %v after resuming, want all 4 again", got)
	}
}

// A shard out of the cluster decides nothing and its tables change
// nothing; as it enters, what it decided meanwhile is fenced.
func TestOutOfTheClusterUntilEnter(t *testing.T) {
	s := ownership.New(partitions)
	s.Leave()
	s.Step([]uint32{1}, partition.Event{Kind: partition.FencedPulled, From: "b"})
	if got := s.Apply("a", table(t, "b"), table(t, "a")); got != nil || len(decided(s)) != 0 {
		t.Fatalf("out: takeovers %v, decided %v; want nothing", got, decided(s))
	}
	if !s.Enter() || s.State(1) != partition.Fenced || len(decided(s)) != 0 {
		t.Fatalf("entered: partition 1 %v, decided %v; want fenced, nothing decided", s.State(1), decided(s))
	}
}

// A partition the previous table gives nobody is taken over from the last
// owner a table named; a taker's pull finds a shard behind its table
// until that shard's table names it or the taker.
func TestNobodyMeansTheLastOwnerAndBehind(t *testing.T) {
	s := ownership.New(partitions)
	s.Apply("a", nil, table(t, "b"))
	s.Apply("a", table(t, "b"), table(t))
	tks := s.Apply("a", table(t), table(t, "a"))
	if len(tks) != 1 || tks[0].From.ID != "b" || len(tks[0].Partitions) != partitions {
		t.Fatalf("takeovers %v, want every partition from b, its last owner", tks)
	}
	c := ownership.New(partitions)
	c.Apply("c", nil, table(t, "b"))
	if !c.Behind([]uint32{0}, "c", "a") {
		t.Fatal("a taker's pull at a shard whose table names b: not behind, want behind")
	}
	if c.Behind([]uint32{0}, "c", "b") || c.Behind([]uint32{0}, "c", "") {
		t.Fatal("a pull by the named owner, or by nobody named: behind, want not")
	}
}

// finalCopiedToB returns a Set of shard a, following table ab (a alone),
// whose partition 2, decided here, a final copy fenced towards b.
func finalCopiedToB(t *testing.T) (*ownership.Set, *shardmap.Table) {
	s := ownership.New(partitions)
	ab := table(t, "a")
	s.Apply("a", nil, ab)
	s.Step([]uint32{2}, partition.Event{Kind: partition.FencedPulled})
	s.Step([]uint32{2}, partition.Event{Kind: partition.FinalExport, To: member.Member{ID: "b", Addr: "b:1"}})
	return s, ab
}

// A drop recalls a forwarding partition that the table, changed since its
// final copy, still gives this shard; without a table since, it drops.
func TestDroppingRecallsWhatTheSwitchLeftHere(t *testing.T) {
	s, ab := finalCopiedToB(t)
	if drop, back := s.Dropping("a", ab, []uint32{2}); len(drop) != 1 || back != nil {
		t.Fatalf("no table since the final copy: drop %v, recalls %v; want it dropped", drop, back)
	}
	s.Apply("a", ab, ab)
	if drop, back := s.Dropping("a", ab, []uint32{2}); drop != nil || len(back) != 1 || back[0].From.ID != "b" {
		t.Fatalf("a table since that leaves it here: drop %v, recalls %v; want it recalled from b", drop, back)
	}
	// Taken back, then fenced by another shard's pull (one that followed
	// a late table): its counters here are kept, not forgotten, while a
	// table since gives it here.
	s.Step([]uint32{2}, ev(partition.TakeoverEnded))
	s.Step([]uint32{2}, partition.Event{Kind: partition.FinalExport, To: member.Member{ID: "b", Addr: "b:1"}})
	s.Apply("a", ab, ab)
	s.Recall([]uint32{2}, "")
	s.Step([]uint32{2}, ev(partition.TakeoverEnded))
	s.Step([]uint32{2}, ev(partition.FencedExport))
	if drop, back := s.Dropping("a", ab, []uint32{2}); drop != nil || back != nil || s.State(2) != partition.Fenced {
		t.Fatalf("fenced since, a table since leaving it here: drop %v, recalls %v, state %v; want it kept, fenced", drop, back, s.State(2))
	}
	if drop, back := s.Dropping("a", table(t, "b"), []uint32{2}); drop != nil || back != nil {
		t.Fatalf("fenced since, a table since giving it elsewhere: drop %v, recalls %v; want it kept (a taker may pull it)", drop, back)
	}
}

// A drop keeps the counters of a partition fenced here without a forward
// (by a lost lease, or a taker's pull): a taker may have yet to pull them
// (a shard that lost its lease rejoined and forgot, at its join, the
// partition a final copy had brought it ahead of a switch, which its taker
// was still pulling again across a cut: the simulation's seed 45488). It
// unowns it, and a drop after that forgets them.
func TestDropKeepsWhatWasFencedHere(t *testing.T) {
	s := ownership.New(partitions)
	s.Apply("a", nil, table(t, "a"))
	parts := []uint32{3}
	s.Step(parts, ev(partition.FencedExport))
	if fx := s.Step(parts, ev(partition.Drop)); fx.Of(partition.ForgetCounters) != nil || s.State(3) != partition.Unowned {
		t.Fatalf("a drop of a fenced partition: forgot %v, state %v; want nothing forgotten, unowned", fx.Of(partition.ForgetCounters), s.State(3))
	}
	if fx := s.Step(parts, ev(partition.Drop)); !slices.Equal(fx.Of(partition.ForgetCounters), parts) {
		t.Fatalf("a drop of an unowned partition: forgot %v, want %v", fx.Of(partition.ForgetCounters), parts)
	}
	// Forwarded by a final copy to b: kept until a table gives it to b
	// (a third shard may take it over from here), forgotten after.
	s.Step(parts, ev(partition.FencedPulled))
	s.Step(parts, partition.Event{Kind: partition.FinalExport, To: member.Member{ID: "b", Addr: "b:1"}})
	if fx := s.Step(parts, ev(partition.Drop)); fx.Of(partition.ForgetCounters) != nil {
		t.Fatalf("a drop of a partition forwarded to b, no table giving it to b since: forgot %v, want nothing", fx.Of(partition.ForgetCounters))
	}
	s.Step(parts, ev(partition.FencedPulled))
	s.Step(parts, partition.Event{Kind: partition.FinalExport, To: member.Member{ID: "b", Addr: "b:1"}})
	s.Apply("a", table(t, "a"), table(t, "b"))
	if fx := s.Step(parts, ev(partition.Drop)); !slices.Equal(fx.Of(partition.ForgetCounters), parts) {
		t.Fatalf("a drop of a partition forwarded to b once a table gave it to b: forgot %v, want %v", fx.Of(partition.ForgetCounters), parts)
	}
}

// A partition final-copied to b whose switch gave it to a third shard (b's
// join switched after this shard lost its lease, and the owner function
// gave this shard's partitions to c) keeps its counters here: c takes it
// over from this shard, its previous owner (the simulation's seed 12762,
// every hit of a partition lost). A table since that gives it to b lets
// it go.
func TestDroppingKeepsWhatTheSwitchGaveAThirdShard(t *testing.T) {
	s, ab := finalCopiedToB(t)
	c := table(t, "c")
	s.Apply("a", ab, c)
	if drop, back := s.Dropping("a", c, []uint32{2}); drop != nil || back != nil || s.State(2) != partition.Fenced {
		t.Fatalf("a table since giving it to c: drop %v, recalls %v, state %v; want it kept, fenced", drop, back, s.State(2))
	}
	b := table(t, "b")
	s.Apply("a", c, b)
	if drop, back := s.Dropping("a", b, []uint32{2}); len(drop) != 1 || back != nil {
		t.Fatalf("a table since giving it to b: drop %v, recalls %v; want it dropped", drop, back)
	}
	// Switched to b, then moved on to c: its counters went to b, and c
	// takes it over from there. Dropped.
	s, _ = finalCopiedToB(t)
	s.Apply("a", ab, b)
	s.Apply("a", b, c)
	if drop, back := s.Dropping("a", c, []uint32{2}); len(drop) != 1 || back != nil {
		t.Fatalf("switched to b, then moved on to c: drop %v, recalls %v; want it dropped", drop, back)
	}
}

// A final copy from b that arrives after the owner table moved the
// partition from b to a third shard (b lost its lease, c takes it over
// from b) is not decided here: Step names the table's owner (Event.Is).
func TestFinalPulledAfterTheTableMovedItElsewhere(t *testing.T) {
	s := ownership.New(partitions)
	ab, ac := table(t, "a", "b"), table(t, "a", "c")
	p := movedFromBToC(t, ab, ac)
	pulled := partition.Event{Kind: partition.FinalPulled, From: "b", Me: "a"}
	s.Apply("a", nil, ab)
	s.Step([]uint32{uint32(p)}, ev(partition.FinalPullStarts))
	s.Step([]uint32{uint32(p)}, pulled)
	if st := s.State(p); st != partition.Owned {
		t.Fatalf("state %v after a final copy from the owner the table names, want owned", st)
	}
	s.Step([]uint32{uint32(p)}, ev(partition.FencedExport))
	s.Step([]uint32{uint32(p)}, ev(partition.FinalPullStarts))
	s.Apply("a", ab, ac) // b lost its lease: c takes p over from b
	s.Step([]uint32{uint32(p)}, pulled)
	if st := s.State(p); st != partition.Fenced {
		t.Fatalf("state %v after a final copy from b, which the table moved p from to c, want fenced", st)
	}
}

// movedFromBToC returns a partition that ab gives b and ac gives c.
func movedFromBToC(t *testing.T, ab, ac *shardmap.Table) int {
	t.Helper()
	for p := range partitions {
		if ab.Owns(p, "b") && ac.Owns(p, "c") {
			return p
		}
	}
	t.Fatal("no partition moves from b to c")
	return -1
}

// Out of the cluster (a process restarted within its predecessor's
// lease), a table that names this shard names the predecessor, whose
// counters died with it: the last owner named before it stays the one a
// join pulls from (LastOwners). Registered, a table naming it is noted.
func TestLastOwnersWhileOutSkipsThisShard(t *testing.T) {
	s := ownership.New(partitions)
	ab, a := table(t, "a", "b"), table(t, "a")
	p := -1
	for q := range partitions {
		if ab.Owns(q, "b") {
			p = q
			break
		}
	}
	s.Leave()
	s.Apply("a", nil, ab)
	s.Apply("a", ab, a) // b's lease lost: p goes to a's earlier record
	if tks := s.LastOwners([]uint32{uint32(p)}, "a"); len(tks) != 1 || tks[0].From.ID != "b" {
		t.Fatalf("out: last owners %v, want p from b", tks)
	}
	s.Enter()
	s.Apply("a", a, a)
	if tks := s.LastOwners([]uint32{uint32(p)}, ""); len(tks) != 1 || tks[0].From.ID != "a" {
		t.Fatalf("registered: last owners %v, want p from a", tks)
	}
}

// A partition that forwards to a final copy's destination whose switch
// never came is recalled from there once the destination's record is
// gone and a table still gives it here; not while the record lives (its
// switch may come), nor once a table gave it to the destination (the
// switch came: the tables' changes take it over from there).
func TestRecallUnswitched(t *testing.T) {
	s := ownership.New(partitions)
	a, ab := table(t, "a"), table(t, "a", "b")
	s.Apply("a", nil, a)
	var toB []uint32
	for p := range partitions {
		if ab.Owns(p, "b") {
			toB = append(toB, uint32(p))
		}
	}
	b := member.Member{ID: "b", Addr: "b:1"}
	s.Step(toB[:3], ev(partition.FencedPulled)) // decided here
	s.Step(toB[:2], partition.Event{Kind: partition.FinalExport, To: b})
	if tks := s.RecallUnswitched("a", a, []string{"a", "b"}); tks != nil {
		t.Fatalf("destination registered: takeovers %v, want none", tks)
	}
	s.Apply("a", a, a)
	tks := s.RecallUnswitched("a", a, []string{"a"})
	if len(tks) != 1 || tks[0].From != b || !slices.Equal(tks[0].Partitions, toB[:2]) || s.State(int(toB[0])) != partition.Pending {
		t.Fatalf("destination gone, no switch: takeovers %v, state %v; want %v from b, pending", tks, s.State(int(toB[0])), toB[:2])
	}
	s.Step(toB[2:3], partition.Event{Kind: partition.FinalExport, To: b})
	s.Apply("a", a, ab) // the switch
	if tks := s.RecallUnswitched("a", a, []string{"a"}); tks != nil {
		t.Fatalf("switched, then gone: takeovers %v, want none (Apply takes it over)", tks)
	}
}

// A give-back's fenced copy of a partition that the last table names
// another shard's is not decided here until a table gives it here (Step
// names the table's owner, Event.Is); one the table gives here is.
func TestFencedPulledAheadOfTheTable(t *testing.T) {
	s := ownership.New(partitions)
	ab := table(t, "a", "b")
	s.Apply("a", nil, ab)
	var toA, toB uint32
	for p := range uint32(partitions) {
		if ab.Owns(int(p), "a") {
			toA = p
		} else {
			toB = p
		}
	}
	s.Step([]uint32{toA, toB}, partition.Event{Kind: partition.FencedPulled, From: "c", Me: "a"})
	if s.State(int(toA)) != partition.Owned || s.State(int(toB)) != partition.Unowned {
		t.Fatalf("given back: %v where the table names a, %v where it names b; want owned, unowned", s.State(int(toA)), s.State(int(toB)))
	}
}

// Heal takes back a stuck partition at once, except one that a hand-off
// fenced here forwarding to a next owner still a member: that one waits
// for the switch. One forwarded to a shard that is no member any more (a
// joiner whose lease was lost before its switch) is taken back at once:
// its checks go nowhere (issue 24: such sources waited out heal's 5 to
// 10 s).
func TestHealableWaitsOnlyForASwitchThatMayCome(t *testing.T) {
	joiner := member.Member{ID: "shard-4", Addr: "10.0.0.4:7000"}
	s := fencedSet([]uint32{2, 3}, joiner, []uint32{1})
	waited := func(p uint32) bool { return p == 3 } // 3 stuck for the whole wait
	for _, c := range []struct {
		name     string
		isMember bool
		want     []uint32
	}{
		{"the next owner is a member: its switch may come", true, []uint32{1, 3}},
		{"the next owner is no member: nothing decides their checks", false, []uint32{1, 2, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := s.Healable([]uint32{1, 2, 3}, waited, func(m member.Member) bool { return m == joiner && c.isMember })
			if !slices.Equal(got, c.want) {
				t.Errorf("heal takes back %v, want %v", got, c.want)
			}
		})
	}
}

// A partition a planned hand-off fenced here, forwarding to a next owner
// still a member, waits for the switch only until a table comes that
// still gives it this shard: the switch came and kept it here (the
// rebalance job's map keeps a pair whose final copy failed with its
// source), so heal takes it back at its next look, not after its wait
// (the review: 5 s more of policy answers for the pair's users).
func TestHealableWaitsNoMoreOnceASwitchKeptItHere(t *testing.T) {
	s := ownership.New(partitions)
	ab := table(t, "a", "b")
	s.Apply("a", nil, ab)
	parts := ab.PartitionsOf("a")[:2]
	b := member.Member{ID: "b", Addr: "b:1"}
	s.Step(parts, ev(partition.FencedPulled))
	s.Step(parts, partition.Event{Kind: partition.FinalExport, To: b})
	healable := func() []uint32 {
		return s.Healable(slices.Clone(parts), func(uint32) bool { return false }, func(m member.Member) bool { return m == b })
	}
	if got := healable(); len(got) != 0 {
		t.Fatalf("before any table since the final copy heal takes back %v, want none (the switch may come)", got)
	}
	s.Apply("a", ab, ab) // the switch, which kept them here
	if got := healable(); !slices.Equal(got, parts) {
		t.Fatalf("once a table since the final copy kept them here heal takes back %v, want %v", got, parts)
	}
}

// Heal asks Healable from its own goroutine while hand-offs step the
// same partitions: it reads them under the lock (go test -race fails
// this otherwise).
func TestHealableReadsUnderTheLock(t *testing.T) {
	s := ownership.New(partitions)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 500 {
			s.Step([]uint32{1}, ev(partition.FencedPulled))
			s.Step([]uint32{1}, partition.Event{Kind: partition.FinalExport, To: member.Member{ID: "b"}})
		}
	}()
	for range 500 {
		s.Healable([]uint32{1}, func(uint32) bool { return false }, func(member.Member) bool { return true })
	}
	<-done
}

// A takeover that an owner table asks for widens: if its owner does not
// answer, the partitions still pending are swept from every other member
// (here c), and decided once every sweep ended; another shard's pull
// meanwhile does not wait for the sweeps.
func TestATableTakeoverFromASilentOwnerSweeps(t *testing.T) {
	s := ownership.New(partitions)
	s.Apply("a", nil, table(t, "b", "c"))
	tks := s.Apply("a", table(t, "b", "c"), table(t, "a", "c"))
	var fromB []uint32
	for _, tk := range tks {
		if !tk.Widen || tk.Sweep {
			t.Fatalf("takeover from %s: widen %v, sweep %v; want a widening takeover", tk.From.ID, tk.Widen, tk.Sweep)
		}
		if tk.From.ID == "b" {
			fromB = tk.Partitions
		}
	}
	if len(fromB) == 0 {
		t.Fatal("no takeover from b")
	}
	fx := s.Step(fromB, partition.Event{Kind: partition.TakeoverEnded, Others: 1}) // b did not answer; c is the other
	if got := fx.Of(partition.TakeOver); !slices.Equal(got, fromB) {
		t.Fatalf("swept %v, want %v", got, fromB)
	}
	if s.State(int(fromB[0])) != partition.Pending || s.Settling(fromB) {
		t.Fatalf("%v while swept, settling %v: want pending, not settling", s.State(int(fromB[0])), s.Settling(fromB))
	}
	s.Step(fromB, partition.Event{Kind: partition.TakeoverEnded, Sweep: true})
	if s.State(int(fromB[0])) != partition.Owned {
		t.Fatalf("%v once swept, want owned", s.State(int(fromB[0])))
	}
}

// A drop keeps the counters of a partition that a taker's fenced pull
// waiting here asked for, and unowns it: the export reads the counters
// once it stops waiting (a rejoining shard's drop forgot them, and the
// taker read zero). Once the pull ended, a drop forgets them.
func TestDropKeepsWhatAWaitingFencedPullAskedFor(t *testing.T) {
	s := ownership.New(partitions)
	s.Step([]uint32{3}, ev(partition.FencedPulled))
	s.Apply("a", table(t, "b"), table(t, "a")) // 3 pulled here: owned
	parts := []uint32{3}
	if s.State(3) != partition.Owned {
		t.Fatalf("state %v, want owned", s.State(3))
	}
	s.FenceDecided(parts, member.Member{})
	if fx := s.Step(parts, ev(partition.Drop)); fx.Of(partition.ForgetCounters) != nil || s.State(3) != partition.Unowned {
		t.Fatalf("a drop while a fenced pull waits: forgot %v, state %v; want nothing forgotten, unowned", fx.Of(partition.ForgetCounters), s.State(3))
	}
	s.FenceEnded(parts)
	if fx := s.Step(parts, ev(partition.Drop)); !slices.Equal(fx.Of(partition.ForgetCounters), parts) || s.State(3) != partition.Unowned {
		t.Fatalf("a drop once the pull ended: forgot %v, state %v; want %v forgotten, unowned", fx.Of(partition.ForgetCounters), s.State(3), parts)
	}
}

// Out of the cluster, Resume decides nothing again: a lease guard that
// found the lease confirmed just before it was lost must not undo Leave.
func TestResumeDoesNotEndLeave(t *testing.T) {
	s := ownership.New(partitions)
	s.Apply("a", nil, table(t, "a"))
	s.Leave()
	if s.Resume() || !s.Suspended() {
		t.Fatalf("Resume after Leave: suspended %v, want still suspended", s.Suspended())
	}
	s.Enter()
	if s.Suspended() {
		t.Fatal("suspended after Enter")
	}
}

// FencedBy names the taker whose fenced pull last asked for a partition
// here, but this shard: heal takes a stuck partition back from it too, as
// a taker that lost its lease may decide it still (the simulation's seed
// 207706: two deciders).
func TestFencedByNamesTheLastTaker(t *testing.T) {
	s := ownership.New(partitions)
	s.Apply("a", nil, table(t, "a"))
	b, c := member.Member{ID: "b", Addr: "b:1"}, member.Member{ID: "c", Addr: "c:1"}
	s.FenceDecided([]uint32{1}, b)
	s.FenceDecided([]uint32{2}, b)
	s.FenceDecided([]uint32{2}, c)
	s.FenceDecided([]uint32{3}, member.Member{ID: "a", Addr: "a:1"})
	if got := s.FencedBy([]uint32{1, 2, 3, 4}, "a"); len(got) != 2 || got[0] != b || got[1] != c {
		t.Fatalf("FencedBy: %v, want b then c (not a itself, nothing for 4)", got)
	}
	if got := s.FencedBy([]uint32{2}, "a"); len(got) != 1 || got[0] != c {
		t.Fatalf("FencedBy(2): %v, want the last taker, c", got)
	}
}
