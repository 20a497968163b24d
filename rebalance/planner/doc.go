// Package planner decides which partitions the rebalance job moves.
//
// Compute is a pure function of (current owner of every partition, live
// members with their Ready flag, load of every partition in decisions per
// minute, Options) → Plan. The rebalance job calls it once per run with the
// shard map it read from etcd and the loads it collected from the shards,
// then hands counters over and publishes the planned owners; the admin API
// and `shardlimit ctl rebalance plan` call it to preview a plan. Everything
// around it does the I/O; the planner itself never reads the clock, draws a
// random number, starts a goroutine, touches the network or etcd, or modifies
// its input, so a plan is a function of its input alone and a test is a
// text file of loads in and plan out (testdata/*.txt).
//
// # Scope
//
// A shard's load is the sum of the loads of the partitions it owns. Only
// partitions owned by a live member are in scope: a partition with no owner
// or with an owner that is not live is neither moved nor counted (routers
// already reassign it, and the planner cannot know where it lands), and Plan
// reports how many there were. The mean is the in-scope load over every live
// member, ready or not. A live member that is not ready counts, keeps its
// partitions and may shed them, but never receives one.
//
// # Algorithm
//
// Greedy, one move at a time, at most Options.MaxMoves moves:
//
//  1. Stop when max/mean is at or under Options.Threshold.
//  2. Take the hottest shard S and the coolest ready shard T other than S
//     (ties: the smaller member ID).
//  3. Among S's partitions not yet moved in this run, with load l > 0 and
//     T + l < S (the target ends cooler than the source was), pick the
//     largest l that is not over want = min(S − mean, (S − T)/2), the amount
//     that brings S toward the mean without overfilling T; when every
//     candidate is over want, pick the smallest one (ties: the smaller
//     partition number).
//  4. When there is no candidate, stop: if S's load is one partition hotter
//     than the mean by itself, no move can lower max/mean (moving it only
//     makes another shard as hot), so it stays and the reason names it.
//  5. Keep the moves up to the last one that lowered the maximum; later
//     ones, which happen when shards tie at the top and not all of them
//     can shed, are dropped. The cap does not cut the search short: when
//     the greedy path still lowers the maximum after MaxMoves moves, the
//     first MaxMoves are kept (Stop is StopMoveCap) and the next run goes
//     on from there, even if those alone only broke a tie at the top.
//
// Loads are integers and the comparisons exact, so there are no rounding
// ties; members are sorted by ID first, so their order in the input does
// not matter.
//
// # Guarantees
//
//   - No move targets a member that is not live or not ready, and no move
//     takes a partition from anyone but its current, live owner.
//   - At most MaxMoves moves; a partition moves at most once per plan.
//   - max/mean after ≤ max/mean before; strictly lower when there are
//     moves, except for a plan cut by the cap while shards tie at the top.
//   - Every move takes l from S to T with T + l < S, which strictly lowers
//     the sum of squared shard loads. So, while loads stay the same, no
//     sequence of moves (within a run or across runs) ever returns to an
//     earlier assignment: partitions never ping-pong.
//   - The same input gives the same plan.
//
// It does not promise the fewest moves possible: that problem is as hard as
// bin packing. The greedy choice of step 3 takes the biggest useful bite
// first, which in practice needs few moves.
package planner
