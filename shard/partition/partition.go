package partition

import "github.com/shardlimit/shardlimit/shard/member"

// State is a partition's state at one shard; see the package
// documentation.
type State uint8

// The states.
const (
	Unowned State = iota
	Owned
	Pending
	Fenced
	Receiving
	states // how many
)

var stateNames = [states]string{"unowned", "owned", "pending", "fenced", "receiving"}

func (s State) String() string {
	if s < states {
		return stateNames[s]
	}
	return "unknown"
}

// States lists every state, for metrics.
func States() []State { return []State{Unowned, Owned, Pending, Fenced, Receiving} }

// Partition is one partition at one shard: its state and what the state
// alone does not say. The zero Partition is Unowned.
type Partition struct {
	State State
	// Pulled: a hand-off's final or fenced copy brought its counters here
	// since the owner table last gave it to this shard, so the next such
	// change finds them here already, if it moves the partition from the
	// shard they came from (From; "": from any).
	Pulled bool
	From   string
	// Takers counts its takeovers under way (a partition whose owner
	// changed twice in quick succession waits for both).
	Takers uint16
	// Sweeps counts its takeovers under way from every other shard, after
	// its previous owner did not answer (TakeoverEnded with Others): they
	// fence any shard still deciding it, and bring what that shard held,
	// but no counters are known to be on their way, so they keep it
	// Pending without making it Settling (a shard taking it over from
	// here in turn is not kept waiting: a cycle of pulls).
	Sweeps uint16
	// To is, while Fenced by a planned hand-off's final copy, the next
	// owner its checks are forwarded to; nil otherwise.
	To *member.Member
	// Held: while Receiving, it was decided here when its final copy
	// began, so a copy that fails leaves it decided. (A takeover brought
	// it here ahead of the hand-off: the source decides it no more, and
	// refuses the copy.)
	Held bool
}

// Decides reports whether the shard decides the partition's checks
// itself.
func (p Partition) Decides() bool { return p.State == Owned }

// Forwards returns the next owner the partition's checks are forwarded
// to, if any.
func (p Partition) Forwards() (member.Member, bool) {
	if p.State != Fenced || p.To == nil {
		return member.Member{}, false
	}
	return *p.To, true
}

// Settling reports whether the partition's counters are on their way
// here, so that its forwarded checks and its exports wait: it is being
// taken over (Pending, or any state with a takeover under way: one that a
// fence overtook still brings counters) or its final copy is arriving
// (Receiving).
func (p Partition) Settling() bool {
	return p.State == Pending && p.Sweeps == 0 || p.State == Receiving || p.Takers > 0
}

// Stuck reports whether the partition, which the owner table gives this
// shard, is neither decided nor on its way to being decided here: a state
// that no hand-off or takeover leaves behind for long.
func (p Partition) Stuck() bool { return p.State == Fenced || p.State == Unowned }

// Kind names an event; see the package documentation.
type Kind uint8

// The events, by the side of a hand-off that sees them.
const (
	// Export side (the source).
	FirstExport Kind = iota + 1
	FinalExport
	FencedExport
	Drop
	// Pull side (the destination).
	FinalPullStarts
	FinalPulled
	FinalPullFailed
	FencedPulled
	// The owner table and takeovers.
	OwnerChanged
	TakeoverEnded
	Reclaim
	Recall
)

var kindNames = [...]string{"", "first export", "final export", "fenced export", "drop", "final pull starts", "final pulled",
	"final pull failed", "fenced pulled", "owner changed", "takeover ended", "reclaim", "recall"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return "unknown"
}

// Event is something that happened to a partition at this shard. Kind
// says what; the other fields only for the kinds that name them.
type Event struct {
	Kind Kind
	// FinalExport: the next owner, which the checks are forwarded to.
	To member.Member
	// FinalExport: the first copy failed, so the final copy reads the
	// whole partition, not only its journal.
	Whole bool
	// OwnerChanged: this shard's id, and the partition's owner in the
	// previous and the next owner table ("" for nobody). FinalPulled,
	// FencedPulled: this shard's id, and the owner that the last table
	// naming one named (package ownership's Step fills Is).
	Me, Was, Is string
	// FinalPulled, FencedPulled: the shard the copy came from ("": from
	// several, or none).
	From string
	// Reclaim: how many takeovers will end it (each with TakeoverEnded).
	Takers int
	// TakeoverEnded: the previous owner did not answer (it crashed, or
	// stayed silent), and the host takes the partition over from this
	// many other shards too before it is decided (0: it is decided from
	// what arrived): sweeps. Sweep: the takeover that ended was a sweep.
	Others int
	Sweep  bool
}

// Effect is what the host must do after a step: a set of actions.
type Effect uint8

// The effects.
const (
	// StartJournal: journal the keys of the partition that change from now
	// on, for this hand-off (before reading it for the first copy).
	StartJournal Effect = 1 << iota
	// ReadJournal: the final copy reads only the keys the partition's
	// journal of this hand-off recorded (all of it if there is none), and
	// ends that journal.
	ReadJournal
	// EndJournal: forget the partition's journal, if any.
	EndJournal
	// ForgetCounters: delete the partition's keys.
	ForgetCounters
	// TakeOver: pull the partition with a fence from its previous owner
	// (OwnerChanged: Event.Was; Recall: the next owner it forwarded to;
	// TakeoverEnded: each of the Event.Others the host named), then step
	// TakeoverEnded.
	TakeOver
	// TakeOverForward: OwnerChanged only, beside TakeOver: pull it with a
	// fence from the next owner it forwarded to before the step (its
	// Partition.To: a final copy took its counters there, and that shard
	// may decide it) as well, then step TakeoverEnded again.
	TakeOverForward
	// Wake: the partition left Pending or Receiving, or a takeover ended:
	// wake the checks waiting for it to settle.
	Wake
	// Refuse: the event does not apply (a final copy asked of a partition
	// this shard does not decide: another shard took it over meanwhile).
	// The partition is unchanged; the host refuses the whole request, and
	// none of its partitions changes.
	Refuse
)

// Step returns partition p after event e, and the effects the host must
// perform; see the package documentation for the table. It is pure: no
// I/O, no clock, no goroutine.
func Step(p Partition, e Event) (Partition, Effect) {
	was := p
	var fx Effect
	switch e.Kind {
	case FirstExport:
		fx = StartJournal
	case FinalExport:
		if p.State != Owned {
			return p, Refuse
		}
		to := e.To
		p = Partition{State: Fenced, Takers: p.Takers, To: &to}
		fx = ReadJournal
		if e.Whole {
			fx = EndJournal
		}
	case FencedExport:
		to := p.To // a fence over a forward keeps it: the counters are there (Recall)
		if p.State != Fenced {
			to = nil
		}
		p = Partition{State: Fenced, Takers: p.Takers, To: to}
		fx = EndJournal
	case Drop:
		// Kept: one that came back here since, and one whose takeover still
		// merges counters here (settling).
		if p.Stuck() && p.Takers == 0 {
			p = Partition{Takers: p.Takers}
			fx = EndJournal | ForgetCounters
		}
	case FinalPullStarts:
		if p.State != Pending {
			p = Partition{State: Receiving, Pulled: p.Pulled, From: p.From, Takers: p.Takers, Held: p.State == Owned}
		}
	case FinalPulled:
		switch {
		case p.State == Receiving && e.Me != "" && e.Is != "" && e.Is != e.From && e.Is != e.Me:
			// The owner table moved it from its source to a third shard
			// while the copy ran (the source lost its lease): that shard
			// takes it over from there. Do not decide it beside it.
			p = Partition{State: Fenced, Takers: p.Takers}
		case p.State == Receiving:
			p = Partition{State: Owned, Pulled: true, From: e.From, Takers: p.Takers}
		case p.State == Owned:
			p.Pulled, p.From = true, e.From
		}
	case FinalPullFailed:
		switch {
		case p.State == Receiving && p.Held:
			p = Partition{State: Owned, Pulled: p.Pulled, From: p.From, Takers: p.Takers}
		case p.State == Receiving:
			p = Partition{Takers: p.Takers}
		}
	case FencedPulled:
		switch {
		case p.State == Pending:
			p.Pulled, p.From = true, e.From // its takeover settles it
		case p.State == Fenced:
			// Another shard took it from here since: the copy is older.
		case p.State == Receiving:
			// The final copy under way decides it, once its source is
			// fenced: not this copy, which may have left that source
			// deciding.
		case p.State == Unowned && e.From != "" && e.Me != "" && e.Is != e.Me:
			// A give-back ahead of the table that gives it here: the
			// owner this shard's table names may decide it still, and a
			// shard whose tables named no owner yet (a process that
			// started within its predecessor's lease, which the
			// give-back was meant for) may have one to see that gives it
			// to a third. The table's change decides it here (Pulled,
			// From), or takes it over from that owner.
			p.Pulled, p.From = true, e.From
		default:
			p = Partition{State: Owned, Pulled: true, From: e.From, Takers: p.Takers}
		}
	case OwnerChanged:
		p, fx = ownerChanged(p, e)
	case TakeoverEnded:
		switch {
		case e.Sweep && p.Sweeps > 0:
			p.Sweeps--
		case !e.Sweep && p.Takers > 0:
			p.Takers--
		}
		fx = Wake // a takeover ended, whatever is left Pending
		switch {
		case p.State == Pending && e.Others > 0:
			// Its previous owner did not answer: a shard that the table
			// moved it from to that owner, or the destination of a final
			// copy from it, may decide it still, until its own table
			// catches up. Sweep the others too.
			p.Sweeps += uint16(e.Others)
			fx |= TakeOver
		case p.State == Pending && p.Takers == 0 && p.Sweeps == 0:
			p = Partition{State: Owned, Pulled: p.Pulled, From: p.From}
		}
	case Reclaim:
		switch {
		case !p.Stuck():
		case e.Takers == 0 && p.Takers == 0 && p.Sweeps == 0:
			// Nobody to take it from, and no takeover or sweep under
			// way: decided here at once.
			p = Partition{State: Owned, Pulled: p.Pulled, From: p.From}
			fx = Wake
		default:
			// A takeover still under way (a fence overtook it) ends it
			// too: its TakeoverEnded is its own, not one of these.
			p = Partition{State: Pending, Pulled: p.Pulled, From: p.From, Takers: p.Takers + uint16(e.Takers)}
		}
	case Recall:
		if _, ok := p.Forwards(); ok {
			p = Partition{State: Pending, Takers: p.Takers + 1}
			fx = TakeOver
		}
	}
	if e.Kind != TakeoverEnded {
		// Sweeps under way end with their own TakeoverEnded, whatever
		// the partition went through meanwhile: counted across every
		// step, so that none ends a later takeover's sweeps in their
		// place.
		p.Sweeps = was.Sweeps
	}
	if was.Settling() && p.State != was.State {
		fx |= Wake
	}
	return p, fx
}

// ownerChanged is Step's OwnerChanged: for a partition the next table
// gives this shard and the previous gave another, Owned if a hand-off
// brought it here from that shard (Pulled, From) or nobody owned it (no
// counters anywhere), else Pending and taken over from its previous
// owner (a copy from a third shard does not stop the previous owner,
// which may have taken it over meanwhile, from deciding it), and from the
// shard it forwarded to, if another (a final copy took its counters
// there, ahead of a switch that did not come). One that stays here
// keeps its state, and so does one that moves away (routers that have not
// switched are still answered, until a hand-off fences or drops it), but
// it forgets that it was pulled here; one still decided here that moves
// between two other shards is fenced (the next takes it over from the
// previous, not from here), and so is one being taken over here that
// moves away.
func ownerChanged(p Partition, e Event) (Partition, Effect) {
	switch {
	case e.Is != e.Me:
		if e.Was != e.Is && (e.Was != e.Me && p.State == Owned || p.State == Pending) {
			// Decided here while the table gave it to another shard (a
			// final copy arrived ahead of a switch that went elsewhere,
			// or one from here failed and the switch went ahead), which
			// now passes it to a third: that one takes it over from the
			// other, and no fence comes here (the other died, or its own
			// takeover from here has not come). Or being taken over
			// here, and moved away: the next owner's pull may give up
			// before the takeover ends, and nothing would fence it then.
			// Stop deciding it; a takeover under way still ends, and an
			// export waits for it.
			return Partition{State: Fenced, Takers: p.Takers}, 0
		}
		if e.Was != e.Is {
			p.Pulled, p.From = false, "" // pulled ahead of a switch that did not come: stale
		}
	case e.Was == e.Me:
	case e.Was == "" && p.To != nil:
		// Fenced by a final copy before this shard saw the table that
		// gave it here from nobody (the hand-off that gave it here had no
		// pair, so no settle, and the next one's final copy came first):
		// its counters are at the next owner, which decides it once it
		// switches.
	case p.Pulled && (p.From == "" || p.From == e.Was), e.Was == "":
		return Partition{State: Owned, Takers: p.Takers}, 0
	case p.To != nil && p.To.ID != e.Was:
		// Fenced by a final copy whose switch did not come, forwarding
		// to a shard that holds its counters and decides it: take it
		// over from there too, so that it decides it no more.
		return Partition{State: Pending, Takers: p.Takers + 2}, TakeOver | TakeOverForward
	default:
		return Partition{State: Pending, Takers: p.Takers + 1}, TakeOver
	}
	return p, 0
}
