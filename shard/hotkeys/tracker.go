package hotkeys

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Key names a counter key: the store gives the key's hash under its
// process's secret seed (package shard's Store.hash) as Hi, with Lo 0; no
// caller can collide it on purpose. This package cannot import shard,
// which imports it.
type Key struct{ Hi, Lo uint64 }

// HotKey is one of the hottest keys.
type HotKey struct {
	Key     Key    `json:"-"`
	Service string `json:"service"`
	Rule    string `json:"rule"`
	User    string `json:"user"`
	// Count is the estimated weight, never below the true one unless
	// Sampled.
	Count uint64 `json:"count"`
	// Error bounds the overestimate of counting in a bounded summary: the
	// true weight is at least Count − Error. It is at most Total/Counters.
	Error uint64 `json:"error"`
	// Sampled is true when Count includes weight from sampled calls (the
	// period passed ExactUpTo with Sample > 1); it is then an estimate
	// whose sampling error, either way, is within SamplingError at three
	// standard deviations (about 99.7%). With Sampled false and Error 0,
	// Count is exact.
	Sampled       bool   `json:"sampled"`
	SamplingError uint64 `json:"sampling_error"`
}

// Exact reports whether h.Count is the key's true weight.
func (h HotKey) Exact() bool { return h.Error == 0 && !h.Sampled }

// Options configure a Tracker.
type Options struct {
	// K is how many keys Top returns when asked for k ≤ 0; default 20.
	K int
	// Counters is the number of counters in each summary, at least K;
	// default max(256, 8·K). A key with more than 1/Counters of the
	// observations is always found, and Error ≤ Total/Counters.
	Counters int
	// Stripes is the number of summaries that writers spread over, rounded
	// up to a power of two, at most 256; default 8. At least GOMAXPROCS
	// lets each P keep a stripe of its own.
	Stripes int
	// Sample observes one call in Sample, at random, weighted Sample
	// times, at most 65536, once a period has observed ExactUpTo; default
	// 1: every call, and the bounds are exact.
	Sample int
	// ExactUpTo is the weight each period observes call by call before
	// Sample applies, at most 2⁴⁰: below it the counts are exact (within
	// Error) whatever Sample is; default 1000000.
	ExactUpTo int
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{K: 20, Counters: 256, Stripes: 8, Sample: 1, ExactUpTo: 1_000_000}
}

// ErrOptions is wrapped by New's errors.
var ErrOptions = errors.New("hotkeys: bad options")

func (o *Options) fill() {
	d := DefaultOptions()
	if o.K == 0 {
		o.K = d.K
	}
	if o.Counters == 0 {
		o.Counters = max(d.Counters, 8*o.K)
	}
	if o.Stripes == 0 {
		o.Stripes = d.Stripes
	}
	if o.Sample == 0 {
		o.Sample = d.Sample
	}
	if o.ExactUpTo == 0 {
		o.ExactUpTo = d.ExactUpTo
	}
}

func (o *Options) validate() error {
	switch {
	case o.K < 1:
		return fmt.Errorf("%w: k %d is below 1", ErrOptions, o.K)
	case o.Counters < o.K || o.Counters > 1<<20:
		return fmt.Errorf("%w: counters %d not in k..%d", ErrOptions, o.Counters, 1<<20)
	case o.Stripes < 1 || o.Stripes > 256:
		return fmt.Errorf("%w: stripes %d not in 1..256", ErrOptions, o.Stripes)
	case o.Sample < 1 || o.Sample > 1<<16:
		return fmt.Errorf("%w: sample %d not in 1..%d", ErrOptions, o.Sample, 1<<16)
	case o.ExactUpTo < 1 || o.ExactUpTo > 1<<40:
		return fmt.Errorf("%w: exact up to %d not in 1..%d", ErrOptions, o.ExactUpTo, int64(1)<<40)
	}
	return nil
}

// Tracker finds the hottest keys. It is safe for concurrent use.
type Tracker struct {
	k        int
	counters int
	mask     uint32
	stripes  []stripe
	sample   uint64 // Options.Sample
	// threshold is 2³²/Sample: a call is observed when a random uint32 is
	// below it.
	threshold uint32
	exactUpTo uint64        // Options.ExactUpTo
	next      atomic.Uint32 // the stripe the pool hands out when it has none
	affinity  sync.Pool     // of *stripe: the stripe this P used last
	// exact counts the weight the current period observed call by call,
	// while below exactUpTo; past it, sampling is set and exact no longer
	// written, so at high volume Observe only reads this cache line.
	_        [64]byte
	exact    atomic.Uint64
	sampling atomic.Bool
}

type stripe struct {
	mu        sync.Mutex
	i         uint32 // index in Tracker.stripes
	cur, prev summary
	_         [64]byte // keep stripes' locks on separate cache lines
}

// New returns an empty Tracker; zero options take their defaults.
func New(opts Options) (*Tracker, error) {
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	n := 1
	for n < opts.Stripes {
		n *= 2
	}
	t := &Tracker{
		k: opts.K, counters: opts.Counters, mask: uint32(n - 1), stripes: make([]stripe, n),
		sample: uint64(opts.Sample), threshold: uint32((1 << 32) / uint64(opts.Sample)),
		exactUpTo: uint64(opts.ExactUpTo),
	}
	t.affinity.New = func() any { return &t.stripes[t.next.Add(1)&t.mask] }
	for i := range t.stripes {
		t.stripes[i].i = uint32(i)
		t.stripes[i].cur = newSummary(opts.Counters)
		t.stripes[i].prev = newSummary(opts.Counters)
	}
	return t, nil
}

// Observe counts n decisions of key k, which hashes (service, rule, user).
// It allocates nothing, and waits for another writer only when every
// stripe is busy.
func (t *Tracker) Observe(k Key, service, rule, user string, n uint64) {
	b := t.Batch()
	b.Observe(k, service, rule, user, n)
	b.Done()
}

// Batch observes the calls of one batch of decisions under one stripe
// lock, taken at the first call sampled and held until Done. A Batch of a
// nil Tracker observes nothing. It is for one goroutine, and must end with
// Done.
type Batch struct {
	t   *Tracker
	st  *stripe // locked; nil until the first call sampled
	rng uint64  // xorshift state for sampling, seeded at the first call
	// exact is the weight this batch observed call by call and has not
	// yet added to Tracker.exact: added once, at Done or at the switch
	// to sampling, instead of an atomic add on a shared line per call.
	exact uint64
}

// Batch starts a batch of observations.
func (t *Tracker) Batch() Batch { return Batch{t: t} }

// Observe counts n decisions of key k as Tracker.Observe does.
func (b *Batch) Observe(k Key, service, rule, user string, n uint64) {
	t := b.t
	if n == 0 || t == nil {
		return
	}
	sampled := t.sample > 1 && t.sampling.Load()
	if sampled {
		if b.rng == 0 {
			b.rng = rand.Uint64() | 1
		}
		b.rng ^= b.rng << 13
		b.rng ^= b.rng >> 7
		b.rng ^= b.rng << 17
		if uint32(b.rng>>32) >= t.threshold {
			return
		}
		n *= t.sample
	} else if t.sample > 1 {
		if b.exact += n; t.exact.Load()+b.exact >= t.exactUpTo {
			b.addExact() // this call is still observed exactly
		}
	}
	if b.st == nil {
		b.st = t.affinity.Get().(*stripe)
		if !b.st.mu.TryLock() {
			b.st = t.lockOther(b.st)
		}
	}
	b.st.cur.observe(k, service, rule, user, n)
	if sampled {
		b.st.cur.sampled += n
	}
}

// addExact adds the batch's exact weight to the period's, and switches
// the period to sampling when that reaches ExactUpTo.
func (b *Batch) addExact() {
	if b.t.exact.Add(b.exact) >= b.t.exactUpTo {
		b.t.sampling.Store(true)
	}
	b.exact = 0
}

// Done ends the batch, releasing its stripe.
func (b *Batch) Done() {
	if b.exact > 0 {
		b.addExact()
	}
	if b.st != nil {
		b.st.mu.Unlock()
		b.t.affinity.Put(b.st)
		b.st = nil
	}
}

// lockOther locks the first free stripe after busy, or, when every stripe
// is busy, waits for busy.
func (t *Tracker) lockOther(busy *stripe) *stripe {
	i := busy.i
	for range t.mask {
		i = (i + 1) & t.mask
		if st := &t.stripes[i]; st.mu.TryLock() {
			return st
		}
	}
	st := &t.stripes[(i+1)&t.mask]
	st.mu.Lock()
	return st
}

// Rotate starts a new period, observed call by call up to ExactUpTo: the
// one before the current is forgotten. A call in flight may still count,
// exactly or sampled, as the previous period decided.
func (t *Tracker) Rotate() {
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		st.cur, st.prev = st.prev, st.cur
		st.cur.reset()
		st.mu.Unlock()
	}
	t.exact.Store(0)
	t.sampling.Store(false)
}

// Total returns the weight observed in the period Top covers.
func (t *Tracker) Total() uint64 {
	n, _ := t.Volume()
	return n
}

// Volume returns the weight observed in the period Top covers, and how
// much of it comes from sampled calls (0: every count is exact within its
// Error).
func (t *Tracker) Volume() (total, sampled uint64) {
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		total += st.cur.n + st.prev.n
		sampled += st.cur.sampled + st.prev.sampled
		st.mu.Unlock()
	}
	return total, sampled
}

// Top returns at most k of the hottest keys (K if k ≤ 0), by Count, highest
// first; ties go to the smaller Error.
func (t *Tracker) Top(k int) []HotKey {
	if k <= 0 {
		k = t.k
	}
	views := make([]view, 0, 2*len(t.stripes))
	var sampled uint64 // weight from sampled calls
	for i := range t.stripes {
		st := &t.stripes[i]
		st.mu.Lock()
		views = append(views, st.cur.view(), st.prev.view())
		sampled += st.cur.sampled + st.prev.sampled
		st.mu.Unlock()
	}
	type agg struct {
		HotKey
		boundPresent uint64 // the summed bounds of the summaries holding it
	}
	var aggs []agg
	index := map[Key]int{}
	for v := range views {
		for _, h := range views[v].keys {
			j, ok := index[h.Key]
			if !ok {
				j = len(aggs)
				index[h.Key] = j
				aggs = append(aggs, agg{HotKey: HotKey{Key: h.Key, Service: h.Service, Rule: h.Rule, User: h.User}})
			}
			a := &aggs[j]
			a.Count += h.Count
			a.Error += h.Error
			a.boundPresent += views[v].bound(h.Key)
		}
	}
	out := make([]HotKey, len(aggs))
	for i, a := range aggs {
		// Where a summary does not hold the key, its weight there is
		// anything from 0 to its bucket there.
		absent := -a.boundPresent
		for v := range views {
			absent += views[v].bound(a.Key)
		}
		a.Count += absent
		a.Error += absent
		if sampled > 0 {
			a.Sampled = true
			a.SamplingError = t.samplingError(min(a.Count, sampled))
		}
		out[i] = a.HotKey
	}
	slices.SortFunc(out, func(a, b HotKey) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Error, b.Error),
			cmp.Compare(a.Key.Hi, b.Key.Hi), cmp.Compare(a.Key.Lo, b.Key.Lo))
	})
	if len(out) > k {
		out = out[:k:k]
	}
	return out
}

// samplingError is three standard deviations of the estimate of a weight
// w observed one call in Sample, each weighted Sample: Sample·Binomial(w,
// 1/Sample) has variance (Sample − 1)·w.
func (t *Tracker) samplingError(w uint64) uint64 {
	return uint64(math.Ceil(3 * math.Sqrt(float64(t.sample-1)*float64(w))))
}

// Bytes returns the memory the Tracker holds, not counting the strings it
// refers to.
func (t *Tracker) Bytes() int {
	s := &t.stripes[0].cur
	per := len(s.slots)*int(unsafe.Sizeof(slot{})) + len(s.filter)*8 +
		t.counters*int(unsafe.Sizeof(entry{})+unsafe.Sizeof(node{}))
	return int(unsafe.Sizeof(*t)) + len(t.stripes)*(int(unsafe.Sizeof(stripe{}))+2*per)
}
