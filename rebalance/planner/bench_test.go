package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchInput spreads partitions uniformly over members, with loads from a
// heavy tail and two members' partitions three times hotter, so that a
// plan has real work to do.
func benchInput(partitions, members int) Input {
	r := rand.New(rand.NewPCG(5, 6))
	in := Input{Owners: make([]string, partitions), Load: make([]uint64, partitions)}
	ids := make([]string, members)
	for i := range ids {
		ids[i] = fmt.Sprintf("shard-%03d", i)
		in.Members = append(in.Members, Member{ID: ids[i], Ready: true})
	}
	for p := range partitions {
		m := r.IntN(members)
		in.Owners[p] = ids[m]
		in.Load[p] = uint64(r.ExpFloat64() * 1000)
		if m < 2 {
			in.Load[p] *= 3
		}
	}
	return in
}

func BenchmarkCompute(b *testing.B) {
	for _, partitions := range []int{1024, 65536} {
		for _, members := range []int{16, 64} {
			b.Run(fmt.Sprintf("partitions=%d/members=%d", partitions, members), func(b *testing.B) {
				in := benchInput(partitions, members)
				p, err := Compute(in, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Compute(in, Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(p.Moves)), "moves")
				b.ReportMetric(p.RatioBefore, "ratio-before")
				b.ReportMetric(p.RatioAfter, "ratio-after")
			})
		}
	}
}
