package handoff

import (
	"cmp"
	"slices"

	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// Pair is the partitions whose counters move from one shard to another.
type Pair struct {
	From, To   member.Member
	Partitions []uint32
}

// Pairs returns the partitions whose owner differs between before and
// after, grouped by (from, to) and sorted by their ids. A partition with
// no owner before has nothing to copy, and one with no owner after has
// nowhere to go: both are left out. The tables must have the same
// partition count.
func Pairs(before, after *shardmap.Table) []Pair {
	index := map[[2]string]int{}
	var out []Pair
	for p := range before.Partitions() {
		from, okFrom := before.Owner(p)
		to, okTo := after.Owner(p)
		if !okFrom || !okTo || from.ID == to.ID {
			continue
		}
		k := [2]string{from.ID, to.ID}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, Pair{From: from, To: to})
		}
		out[i].Partitions = append(out[i].Partitions, uint32(p))
	}
	slices.SortFunc(out, func(a, b Pair) int {
		return cmp.Or(cmp.Compare(a.From.ID, b.From.ID), cmp.Compare(a.To.ID, b.To.ID))
	})
	return out
}

// Partitions returns how many partitions the pairs move.
func Partitions(pairs []Pair) int {
	n := 0
	for _, p := range pairs {
		n += len(p.Partitions)
	}
	return n
}

// KeepSources returns next, a shard map's owners ("" leaves a partition
// to the ring), with every partition of the pairs not handed over set
// back as in prev (nil: none pinned): the owners that the rebalance job's
// switch publishes. prev, the map in force, gives a pair's partition to
// its source (From) unless the ring changed since the pairs were computed
// (a member's lease lost mid-run): then the ring gives it to the shard
// that took it over already, and set back as in prev it stays there,
// where pinning it to the source would move it again. So no table moves a partition whose counters did not
// move: its source, which still decides it (the final copy never reached
// it) or forwards it to the destination (its fence did; it takes it back
// from there once it sees this map: ownership's Healable), stays its
// owner.
func KeepSources(next, prev []string, notHandedOver []Pair) []string {
	out := slices.Clone(next)
	for _, pr := range notHandedOver {
		for _, p := range pr.Partitions {
			out[p] = ""
			if prev != nil {
				out[p] = prev[p]
			}
		}
	}
	return out
}
