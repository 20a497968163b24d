// Package ownership holds one shard's partitions, each a state machine of
// package partition (whose documentation names the states, the events and
// the hand-off's steps), for concurrent use: the decision path reads them
// once per batch, and the shard host's hand-off handlers and owner-table
// watch step them (Step, Apply, RecallUnswitched, Reclaim, Recall,
// Dropping, FenceDecided, FenceEnded) and perform the effects that the
// steps return. It notes the last owner each table named (LastOwners),
// for partitions a later table gives nobody, and the last taker that
// fenced each partition here (FencedBy), for heal. An owner table's takeovers widen (Takeover.Widen): if
// their owner does not answer (or a process started since at its address
// does), the host sweeps the partitions from every
// other member before they are decided (partition's TakeoverEnded).
//
// # Exact under concurrency
//
// The decision path holds Begin/End around a whole batch (a read lock) and
// asks Decides (and ForwardTo) per check; every step takes the write lock,
// so once a fence returns no batch still decides a fenced partition and an
// export that follows reads every hit it counted. WaitSettled waits for
// partitions to leave Pending and Receiving (the effect Wake), for the
// checks forwarded to a partition still arriving and for an export of a
// partition still being taken over; WaitExportable, for a taker's pull,
// waits too until this shard's table has caught up with the taker's
// (Behind). A taker's pull fences what is decided here, or being taken
// over here, as it arrives, before it waits (FenceDecided), and until its
// export has fenced them all (FenceEnded) any of its partitions that a
// step makes decided meanwhile (a copy here ended) is fenced by that
// step: from the pull's arrival on, none of them is decided here, so that
// a taker that gives up waiting and decides from what arrived does not
// decide beside this shard; a drop meanwhile (a rejoining shard's, of
// what its table gives others) keeps their counters, as the export reads
// them once it stops waiting. So does a drop of a partition fenced here
// without a forward (a lost lease, a taker's pull), or forwarded to a
// shard that no table has given it since (the switch gave it to a third
// shard): a taker may have yet to pull them, across a cut. (A pull that never arrives fences nothing:
// a taker that gives up on an owner it cannot reach relies on that
// owner's lease.) Suspend stops every decision while the shard's lease is
// unconfirmed past its time, keeping the states; Leave stops them, and
// the tables' steps, while the shard is not registered (Enter).
//
// Who calls it: the shard host (package shard). It must never do I/O, read
// the clock or decide a check; a nil *Set decides every partition (a
// shard built without a cluster, in tests).
package ownership
