// Package partition is the hand-off protocol of shardlimit as two pure
// state machines: the state of one partition at one shard, and Step,
// which takes that state and an event and returns the next state and the
// effects that the host (package shard) performs; and HandOff, the order
// of one hand-off's steps over its pairs, which the one running it
// (package handoff's Move, for the rebalance job and the shard host; the
// simulation, package partition/sim) performs. They do no I/O, read no
// clock and start no goroutine; the hosts call them and act. Read this
// first: it is the one place that states the protocol's steps and their
// order; every other place points here.
//
// # A hand-off, in order
//
// A planned change (the rebalance job's move, a shard draining on SIGTERM,
// a shard joining) moves the counters of a set of partitions from each old
// owner (the source) to its new owner (the destination). A HandOff runs
// these steps (its phases), one after the other, for every (source,
// destination) pair at once:
//
//  1. copy: the destination pulls the partitions from the source
//     (FirstExport at the source: it journals which keys change from now
//     on, then streams every key). The source still decides them.
//  2. copy again, the final copy: the destination stops deciding them
//     (FinalPullStarts: Receiving, its forwarded checks wait) and pulls
//     again; the source fences them (FinalExport: Fenced, it decides them
//     no more, and forwards their checks to the destination) and streams
//     only the keys its journal recorded. Once merged, the destination
//     decides them (FinalPulled: Owned), unless the owner table moved them
//     from the source to a third shard meanwhile (the source lost its
//     lease: that shard takes them over from it; Fenced); a copy that
//     failed leaves them to a takeover (FinalPullFailed: Unowned), or
//     decided as they were if they were decided here when it began (Held:
//     a takeover brought them here first, and the source refused). A
//     source that no longer decides a partition (another shard took it
//     over meanwhile) refuses the final copy (Refuse).
//  3. switch: the caller's step after which routers send the partitions to
//     the destination (the job publishes a map, which leaves a pair whose
//     final copy failed with its source; a draining shard writes its
//     member record as draining, a joining one as serving). Each shard
//     sees the new owner table (OwnerChanged).
//  4. settle: wait for every router to follow etcd; a router that has not
//     switched still reaches the source, which forwards.
//  5. drop: the source forgets the partitions (Drop: Unowned), which ends
//     the forwarding; a draining shard exits instead. A drop forgets only
//     a partition the source no longer decides: one that came back to it
//     since is kept; and one that the switch left with the source (a
//     member left meanwhile, and the owner function gave it back) is
//     taken back from the destination (Recall: ownership's Dropping), or
//     kept, counters and all, if it forwards no more; and so is one
//     fenced again since the final copy (its counters here may be the
//     newest, for a taker to pull), and one that the switch gave to a
//     third shard (the source lost its lease meanwhile), which takes it
//     over from the source.
//
// So each moving partition has one decider at every instant: the source
// until its fence, then the destination, directly or through the source's
// forward, holding every hit the source counted (the journal names every
// key decided before the fence). A Strict hand-off whose first copy
// failed stops before step 2: nothing is fenced, nothing switches. A
// drain, not strict, fences at its switch what its final copies could not
// hand over (FencedExport): the next owner counts from what arrived. A
// join takes back a failed pair's partitions (Reclaim) only where the
// table it follows gives them to it. The rebalance job's map keeps a
// failed pair's partitions with their source (package handoff's
// KeepSources), so no table moves a partition whose counters did not
// move: a source that the final copy never reached still decides them;
// one that it fenced forwards them to the destination (which decides
// them only if that copy arrived after all) until it takes them back,
// from there too (Recall once the destination's member record is gone,
// else heal's Reclaim, at its next look once it sees that map: ownership's
// Healable).
//
// # A hand-off's phases (HandOff)
//
// The driver tells HandOff each event and performs the phase it returns;
// the pairs are numbered from 0. A copy phase asks each pair for a Copy
// (Journal, or Fence with HandOff.Fence; Final, Whole where that pair's
// first copy failed) and ends when every pair's copy ended, each either
// way (Copied). NotHandedOver are the pairs whose last copy failed; the
// drop is of the others (HandedOver).
//
//	phase           event                   next phase
//	                Start                   PhaseCopy
//	PhaseCopy       CopiesEnded, no Switch  PhaseDone (a give-back: one copy)
//	                CopiesEnded, Strict, a  PhaseDone (nothing fenced, nothing
//	                copy failed             switched)
//	                CopiesEnded, no pair    PhaseSwitch
//	                CopiesEnded             PhaseCopyAgain
//	PhaseCopyAgain  CopiesEnded             PhaseSwitch
//	PhaseSwitch     SwitchEnded, failed or  PhaseDone (no settle: a hand-off
//	                no pair                 that moved nothing ends at once)
//	                SwitchEnded             PhaseSettle with Settle, unless
//	                                        SkipEmptySettle and no key streamed
//	                                        and no copy failed; else as
//	                                        SettleEnded
//	PhaseSettle     SettleEnded             PhaseDrop with Drop, else PhaseDone
//	PhaseDrop       DropsEnded              PhaseDone
//
// What each pair's copy does at its source and destination, and what the
// switch steps, are the events of the partitions below.
//
// A partition gained without a hand-off (its owner lost its lease, or the
// ring moved it between live shards) is taken over: OwnerChanged makes it
// Pending and asks for a TakeOver, a pull with a fence (FencedExport at the
// previous owner, which decides it no more before it streams), after which
// TakeoverEnded makes it Owned, with whatever arrived (nothing, if the
// owner died). A pull that failed before the previous owner said it
// fenced (a cut between the two; not a refused connection), while that
// owner still holds the member record it is taken over from, is made
// again, the partition Pending meanwhile: the owner may still decide it
// for routers that have not switched; once that record went, once more
// (the owner may not have noticed, and its lease guard passes once the
// cut healed). If the owner did not answer (it
// died, or stayed silent; a process started since at its address answers
// for nobody), the takeover first sweeps it (TakeoverEnded's
// Others): it is pulled with a fence from every other member too, and
// decided once every sweep ended; a shard that the table moved it from to
// the dead one, or the destination of a final copy from it, may decide it
// until its own table catches up, and only a fence stops it in time. A
// previous table that named nobody names, for this, the
// last owner a table named (a shard may hold its counters, even decide
// it). The previous owner's export waits, a while, until its own table
// has caught up with the taker's (ownership's Behind): fenced before it
// saw the table that gave it the partition, it would take the partition
// over afterwards and decide it beside the taker. It fences those it
// decides, or takes over (Pending, a Recall's too), before any wait, and
// until its export fenced them all, any that a step makes decided while
// it waits (its own copy of it ended: ownership's FenceDecided,
// FenceEnded): a taker that gives up on its silence (it waited for
// another of the partitions, being taken over there, perhaps from the
// taker) decides them from what arrived, and from the pull's arrival on it
// decides none of them, nor once its own takeover ends. A shard that lost its lease fences every partition
// (FencedExport) and gives their counters back with fenced pulls
// (FencedPulled at the owners now; a partition fenced there since keeps
// the newer counters where they went, and one whose table there names
// another owner yet, or none (a process restarted within its
// predecessor's lease, which the give-back was meant for), is decided
// only once the table gives it there). A join gains the partitions no
// member owns (every lease was lost at once) by FencedPulled too, after
// pulling them with a fence from the shards that last owned them.
//
// A final copy whose switch never comes (the shard running the hand-off
// stopped, or the source lost its lease first) leaves the source's
// partition Fenced, forwarding to the destination, which holds its
// counters. Any later export of it from the source first takes it back
// from there (Recall, then TakeoverEnded), unless the destination is the
// one asking; once the destination's member record is gone (a joiner
// whose lease was lost mid-join) while no table since gave it the
// partition, the source takes it back at once where its table gives it
// the partition (Recall: ownership's RecallUnswitched); a table that
// gives such a partition back to the source from a third shard takes it
// over from that shard and from the destination, which decides it
// meanwhile (OwnerChanged: TakeOverForward); and a destination that sees
// the owner table move such a partition from the source to a third shard stops deciding it
// (OwnerChanged: Fenced). So does any shard still deciding a partition
// that the table moves between two others (a join's final copy from it
// failed and the join switched anyway, and then the joiner died; a
// rebalance never moves such a partition): the next owner takes
// it over from the previous one, and no fence would come; and any shard
// taking over a partition that the table moves on meanwhile: the next
// owner's pull may give up waiting for that takeover, and no fence would
// come either.
//
// # States
//
//   - Unowned: not this shard's; not decided (a router that switched
//     before this shard saw the change is answered by policy).
//   - Owned: decided here. It stays Owned after the owner table moves it
//     away, so routers that have not switched are answered, until a
//     hand-off fences or drops it.
//   - Pending: gained without a hand-off, being taken over. Not decided.
//   - Fenced: pulled from here with a fence: its counters are elsewhere.
//     Not decided; fenced by a final copy, its checks are forwarded to
//     the next owner (Partition.To).
//   - Receiving: a final copy of it is arriving here. Not decided; the
//     checks its source forwards wait for it. Held if it was Owned when
//     the copy began.
//
// # Events and effects (Step)
//
//	event            state before          state after              effects
//	FirstExport      any                   unchanged                StartJournal
//	FinalExport      Owned                 Fenced, forwarding to To ReadJournal (Whole: EndJournal)
//	                 not Owned             unchanged                Refuse
//	FencedExport     any                   Fenced (a forward stays) EndJournal
//	Drop             Fenced / Unowned      Unowned                  EndJournal, ForgetCounters
//	                 decided or settling   unchanged
//	FinalPullStarts  not Pending           Receiving
//	FinalPulled      Receiving, the table  Fenced
//	                 moved it From the
//	                 source to a third (Is)
//	                 Receiving / Owned     Owned, Pulled From
//	FinalPullFailed  Receiving, Held       Owned
//	                 Receiving             Unowned
//	FencedPulled     Unowned, its table    Pulled From only
//	                 names another or no
//	                 owner (Is)
//	                 Unowned / Owned       Owned, Pulled From
//	                 Receiving             unchanged
//	                 Pending               Pulled From only
//	                 Fenced                unchanged
//	OwnerChanged     moved here, Pulled    Owned
//	                 from Was (or From "")
//	                 moved here from nobody Owned
//	                 (but Fenced, forwarding: unchanged)
//	                 moved here, forwarding Pending, Takers+2       TakeOver (from Was),
//	                 to another than Was                            TakeOverForward (from To)
//	                 moved here otherwise  Pending, Takers+1        TakeOver (from Was)
//	                 moved between others, Fenced
//	                 Owned
//	                 moved, Pending        Fenced
//	                 otherwise             unchanged (moved: not Pulled)
//	TakeoverEnded    Pending, the owner    Pending, Sweeps+Others   TakeOver (from each
//	                 did not answer                                 of the Others), Wake
//	                 (Others)
//	                 Pending, last taker   Owned                    Wake
//	                 or sweep
//	Reclaim          Fenced / Unowned      Pending, Takers+n
//	                 with n = 0 and no     Owned                    Wake
//	                 takeover or sweep
//	                 under way
//	Recall           Fenced, forwarding    Pending, Takers+1        TakeOver (from To)
//
// Any step that changes the state of a Settling partition (below) also
// has the effect Wake. Sweeps under way are counted across every step
// but their own ends (TakeoverEnded with Sweep), whatever the partition
// goes through meanwhile, as takeovers under way are (Takers). A partition is Settling (its checks forwarded here and
// its exports wait) while Pending (unless only sweeps are under way: no
// counters are known to be on their way, and a shard taking it over from
// here in turn must not wait for a sweep that waits for it), Receiving,
// or with any takeover under way (Takers > 0, even once a fence overtook
// it). Reclaim is the host's safety net: a partition the owner
// table gives this shard that stays Stuck (Fenced or Unowned) under the
// same table is taken over again from every other shard (the host looks
// every half second; ownership's Healable leaves one forwarded to a next
// owner still a member a while for its switch, until a table since its
// final copy still gives it this shard).
//
// # What the host keeps
//
// The host (package shard, through package ownership's Set) holds one
// Partition per partition behind a read-write lock: the decision path
// reads Decides and Forwards under the read lock for a whole batch, and
// every step takes the write lock, so once a fence returns no batch still
// decides the partition and the journal holds every key it changed. A
// shard-wide suspension (the lease guard's, while the lease is
// unconfirmed) stops every decision whatever the states say; it is not a
// partition's state. So does being out of the cluster (ownership's
// Leave, Enter): from its start, and from a lost lease, until it
// registers, a shard decides nothing and steps no OwnerChanged (the
// tables name an earlier registration); what it decided meanwhile is
// fenced as it registers, and what a copy marked pulled meanwhile is
// pulled no more (a table giving it here takes it over).
//
// Package partition/sim runs this machine for several shards over a
// simulated network, seeded, and checks the protocol's invariants at every
// step (make sim).
package partition
