package bench

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/shardlimit/shardlimit/shard/key/keytest"
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
	rng     *rand.Rand
	zipf    *rand.Zipf // nil: uniform
	n       uint64
	flood   float64
	collide *keytest.Colliding // nil: random flood names
}

func newPicker(o *Options, worker int) *picker {
	rng := rand.New(rand.NewPCG(o.Seed, uint64(worker)))
	p := &picker{rng: rng, n: uint64(o.Users), flood: o.Flood, collide: o.collide}
	if o.Dist == DistZipf {
		// Rank 0 is the most frequent user.
		p.zipf = rand.NewZipf(rng, o.ZipfS, o.ZipfV, p.n-1)
	}
	return p
}

// user returns the name of the next check's user: a new one, with
// probability flood (named as Options.FloodNames says), else one of names
// drawn by next.
func (p *picker) user(names []string) string {
	if p.flood > 0 && p.rng.Float64() < p.flood {
		n := floodSeq.Add(1)
		if p.collide != nil {
			return p.collide.User((n - 1) % p.collide.Len())
		}
		return floodPrefix + strconv.FormatUint(n, 36)
	}
	return names[p.next()]
}

// The flood's users are numbered in the process, after a prefix that
// makes them new across runs too.
var (
	floodPrefix = "flood-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	floodSeq    atomic.Uint64
)

func (p *picker) next() int {
	if p.zipf != nil {
		return int(p.zipf.Uint64())
	}
	return int(p.rng.Uint64N(p.n))
}
