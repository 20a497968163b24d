package bench

import (
	"math/rand/v2"
	"strconv"
)

// userNames returns the names of n users, built once and shared read-only
// by every worker so that no request formats a name.
func userNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "user-" + strconv.Itoa(i)
	}
	return names
}

// picker draws user indexes in [0, n) for one worker; it is not safe for
// concurrent use.
type picker struct {
	rng  *rand.Rand
	zipf *rand.Zipf // nil: uniform
	n    uint64
}

func newPicker(o *Options, worker int) *picker {
	rng := rand.New(rand.NewPCG(o.Seed, uint64(worker)))
	p := &picker{rng: rng, n: uint64(o.Users)}
	if o.Dist == DistZipf {
		// Rank 0 is the most frequent user.
		p.zipf = rand.NewZipf(rng, o.ZipfS, o.ZipfV, p.n-1)
	}
	return p
}

func (p *picker) next() int {
	if p.zipf != nil {
		return int(p.zipf.Uint64())
	}
	return int(p.rng.Uint64N(p.n))
}
