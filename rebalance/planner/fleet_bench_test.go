package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/member"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// fleetSizes and fleetPartitions are the shard and partition counts of
// issue 27's fleet figures (BENCHMARKS.md, "A fleet on one machine").
var (
	fleetSizes      = []int{8, 16, 32, 64}
	fleetPartitions = []int{1024, 4096, 16384}
)

// ring returns the owner table the routers use (shardmap.DefaultConfig's
// ring) over shards serving members shard-1.., and their ids.
func ring(tb testing.TB, partitions, shards int) (*shardmap.Table, []string) {
	cfg := shardmap.DefaultConfig()
	cfg.Partitions = partitions
	ms := make([]member.Member, shards)
	ids := make([]string, shards)
	for i := range ms {
		ids[i] = fmt.Sprintf("shard-%d", i+1)
		ms[i] = member.Member{ID: ids[i], Addr: "127.0.0.1:1", State: member.Serving}
	}
	t, err := shardmap.Build(cfg, ms)
	if err != nil {
		tb.Fatal(err)
	}
	return t, ids
}

// BenchmarkRing builds the owner function's table (every router and shard
// does on each membership change) and reports the ring's balance: the
// most partitions on one shard over the mean, which is also its max/mean
// load when users spread evenly over partitions.
//
//	go test -run '^$' -bench Ring -benchtime 3x ./rebalance/planner/
func BenchmarkRing(b *testing.B) {
	for _, partitions := range fleetPartitions {
		for _, shards := range fleetSizes {
			b.Run(fmt.Sprintf("partitions=%d/shards=%d", partitions, shards), func(b *testing.B) {
				t, _ := ring(b, partitions, shards)
				counts := t.Count()
				most := 0
				for _, n := range counts {
					most = max(most, n)
				}
				for b.Loop() {
					ring(b, partitions, shards)
				}
				b.ReportMetric(float64(most)/(float64(partitions)/float64(shards)), "max/mean")
			})
		}
	}
}

// BenchmarkComputeFleet plans over the real ring's owners at each fleet
// size, with loads from a heavy tail (seeded) and the first two shards'
// partitions three times hotter, and reports the moves and the balance
// before and after.
//
//	go test -run '^$' -bench ComputeFleet -benchtime 20x ./rebalance/planner/
func BenchmarkComputeFleet(b *testing.B) {
	for _, partitions := range []int{1024, 16384} {
		for _, shards := range fleetSizes {
			b.Run(fmt.Sprintf("partitions=%d/shards=%d", partitions, shards), func(b *testing.B) {
				t, ids := ring(b, partitions, shards)
				r := rand.New(rand.NewPCG(27, 64))
				in := Input{Owners: make([]string, partitions), Load: make([]uint64, partitions)}
				for _, id := range ids {
					in.Members = append(in.Members, Member{ID: id, Ready: true})
				}
				for p := range partitions {
					o, _ := t.Owner(p)
					in.Owners[p] = o.ID
					in.Load[p] = uint64(r.ExpFloat64() * 1000)
					if o.ID == ids[0] || o.ID == ids[1] {
						in.Load[p] *= 3
					}
				}
				var plan Plan
				var took []time.Duration
				for b.Loop() {
					start := time.Now()
					var err error
					if plan, err = Compute(in, Options{}); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)-1].Microseconds()), "max-µs")
				b.ReportMetric(float64(len(plan.Moves)), "moves")
				b.ReportMetric(plan.RatioBefore, "ratio-before")
				b.ReportMetric(plan.RatioAfter, "ratio-after")
			})
		}
	}
}
