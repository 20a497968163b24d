// Package ownership is one shard's view of which partitions it decides
// now: a state per partition, changed by hand-offs and by the owner
// table the shard follows in etcd, and read by the decision path once per
// batch.
//
// # States
//
//   - Unowned: not this shard's. Its checks are not decided (a router
//     that switched before this shard saw the change; it answers them by
//     policy).
//   - Owned: decided. A partition stays Owned after the owner table moves
//     it away, so that routers that have not switched yet are still
//     answered, until a hand-off fences it here (Fence, FenceForward) or
//     drops it (Dropped).
//   - Pending: gained without a hand-off (its previous owner lost its
//     lease, or the ring moved it between live shards), while this shard
//     takes its counters over from the previous owner. Not decided.
//   - Fenced: a taker or a planned hand-off's final copy pulled it from
//     here with a fence: its counters are there now. Not decided. Fenced
//     by a planned hand-off (FenceForward), its checks are forwarded to
//     the next owner (ForwardTo) until any other change of its state.
//   - Receiving: a planned hand-off's final copy of it is arriving here.
//     Not decided; the checks its previous owner forwards wait for it
//     (WaitSettled). It is Owned once pulled (Pulled), and Unowned again
//     if that copy failed (Unreceive), to be taken over with a fence once
//     the owner table gives it here.
//
// A partition becomes Owned when a hand-off's final or fenced copy pulls it
// here (Pulled; a first copy is not enough, its source still decides), when
// the owner table gives it to this shard after such a pull or from no
// owner at all, or when its takeover ends (Settle). Gained (pure) compares
// two owner tables and says, per previous owner, which partitions this
// shard gains without a hand-off: those are set Pending, and the shard
// pulls them with a fence, then settles them. Stuck finds partitions the
// table gives this shard that are neither decided nor being taken over,
// which no hand-off or takeover leaves behind for long; Reclaim makes them
// Pending for a takeover again (the shard's safety net).
//
// # Exact under concurrency
//
// The decision path holds Begin/End around a whole batch (a read lock) and
// asks Decides per check; Fence and every other change take the write
// lock, so once Fence returns no batch still decides a fenced partition and
// an export that follows reads every hit it counted.
//
// Who calls it: the shard host (package shard), on its decision path, its
// hand-off handlers and its owner-table watch. It must never do I/O, read
// the clock or decide a check; a nil *Set decides every partition (a
// shard built without a cluster, in tests).
package ownership
