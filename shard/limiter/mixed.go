package limiter

import "math/bits"

// mixed is a time in ns as a mixed number: i + f/den, with 0 <= f < den.
// den is the rule's limit, so multiples of period/limit are exact.
type mixed struct {
	i, f int64
}

// mulDiv returns n*p/den as a mixed number. n >= 0 and p, den > 0 within
// the rule bounds, so the quotient fits an int64.
func mulDiv(n, p, den int64) mixed {
	hi, lo := bits.Mul64(uint64(n), uint64(p))
	q, r := bits.Div64(hi, lo, uint64(den))
	return mixed{int64(q), int64(r)}
}

func (a mixed) add(b mixed, den int64) mixed {
	s := mixed{a.i + b.i, a.f + b.f}
	if s.f >= den {
		s.i++
		s.f -= den
	}
	return s
}

func (a mixed) sub(b mixed, den int64) mixed {
	d := mixed{a.i - b.i, a.f - b.f}
	if d.f < 0 {
		d.i--
		d.f += den
	}
	return d
}

func (a mixed) less(b mixed) bool {
	return a.i < b.i || (a.i == b.i && a.f < b.f)
}

// ceil rounds up to whole nanoseconds.
func (a mixed) ceil() int64 {
	if a.f > 0 {
		return a.i + 1
	}
	return a.i
}

// floorDiv returns floor(a / (p/den)) = floor((a.i*den + a.f) / p) for a >= 0.
func (a mixed) floorDiv(p, den int64) int64 {
	if a.i < 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a.i), uint64(den))
	lo, c := bits.Add64(lo, uint64(a.f), 0)
	hi += c
	q, _ := bits.Div64(hi, lo, uint64(p))
	return int64(q)
}

// ceilDiv returns ceil(a / (p/den)) for a >= 0, 0 for a <= 0.
func (a mixed) ceilDiv(p, den int64) int64 {
	if a.i < 0 || (a.i == 0 && a.f == 0) {
		return 0
	}
	hi, lo := bits.Mul64(uint64(a.i), uint64(den))
	lo, c := bits.Add64(lo, uint64(a.f), 0)
	hi += c
	q, r := bits.Div64(hi, lo, uint64(p))
	if r > 0 {
		q++
	}
	return int64(q)
}

// mulCmp compares a·b with c·d exactly, for non-negative operands:
// -1, 0 or +1.
func mulCmp(a, b, c, d int64) int {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	switch {
	case h1 < h2 || (h1 == h2 && l1 < l2):
		return -1
	case h1 == h2 && l1 == l2:
		return 0
	}
	return 1
}

// mulDivCap returns min(floor(a·b/c), limit) for a, b >= 0 and c > 0,
// without overflow however large the quotient.
func mulDivCap(a, b, c, limit int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return limit // the quotient needs more than 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > uint64(limit) {
		return limit
	}
	return int64(q)
}

// mulDivCeil returns ceil(a·b/c) for a, b >= 0 and c > 0 whose quotient
// fits an int64.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if r > 0 {
		q++
	}
	return int64(q)
}

// The bucket algorithms keep one time as a mixed number in a State: A is
// its whole ns, the low 32 bits of B its remainder f, and the high 32 bits
// of B the denominator (the effective limit) that f is counted in. Keeping
// the denominator makes a change of limit between two decisions (an
// operator edits the rule, an elastic limit moves with load) safe: the
// backlog is carried over in hits (loadBacklog) and the remainder rounded
// up, so a change of limit never admits a hit early.
const low32 = 1<<32 - 1

// hi32 returns the high 32 bits of x as a non-negative number.
func hi32(x int64) int64 { return int64(uint64(x) >> 32) }

// loadTime reads the time kept in s in units of 1/den ns.
func loadTime(s *State, den int64) mixed {
	d, f := hi32(s.B), s.B&low32
	switch {
	case f == 0:
		return mixed{s.A, 0}
	case d == den && f < den:
		return mixed{s.A, f}
	case d > 0 && f < d:
		if g := mulDivCeil(f, den, d); g < den {
			return mixed{s.A, g}
		}
	}
	return mixed{s.A + 1, 0}
}

// loadBacklog reads the time kept in s as of now for the bucket rule r
// (its effective limit), keeping the hits it holds. A time after now is a
// backlog: of hits for a leaky bucket, of tokens owed for a token bucket
// or a GCRA, each one Period/limit long in the limit it was stored with.
// After a change of limit (an operator edits the rule, an elastic limit
// moves with load) the backlog keeps its hits, each now Period/r.Limit
// long, rounded up. Read as time instead, the backlog of a lower limit
// would shrink in hits and free them at once: a hit let in that neither
// limit allows, and one more each time an elastic limit falls. Kept in
// hits, the hits allowed over any interval stay within the largest
// capacity plus what the largest limit refills over it. A backlog longer
// than any rule's is cut to that (maxAhead, which CheckState allows):
// only a limit cut far below its soft and elastic range gets there.
//
// A converted time is stored back in s, in r.Limit, so that the backlog
// drains from then on in the limit it was read with, and every later read
// under the same limit (a retry after RetryAfter) sees the same time.
func loadBacklog(s *State, now int64, r *Rule) mixed {
	if d := hi32(s.B); d == 0 || d == r.Limit {
		return loadTime(s, r.Limit) // the limit it was stored in: the decision path
	}
	return carryBacklog(s, now, r)
}

// carryBacklog is loadBacklog for a time stored in another limit.
func carryBacklog(s *State, now int64, r *Rule) mixed {
	den, d := r.Limit, hi32(s.B)
	t := loadTime(s, den)
	nowM := mixed{now, 0}
	if !nowM.less(t) {
		return t
	}
	// The backlog is (t − now)·d/den ns: its hits counted in units of
	// 1/den ns. The remainder is below d for any state stored here.
	whole, f := s.A-now, min(s.B&low32, d-1)
	hi, lo := bits.Mul64(uint64(whole), uint64(d))
	lo, c := bits.Add64(lo, uint64(f), 0)
	hi += c
	t = mixed{now + maxAhead, 0}
	if hi < uint64(den) {
		if q, rem := bits.Div64(hi, lo, uint64(den)); q < uint64(maxAhead) {
			t = mixed{now + int64(q), int64(rem)}
		}
	}
	storeTime(s, t, den)
	return t
}

// storeTime keeps t, whose remainder is in units of 1/den ns, in s.
func storeTime(s *State, t mixed, den int64) {
	s.A, s.B = t.i, den<<32|t.f
}

// max returns the later of a and b.
func (a mixed) max(b mixed) mixed {
	if a.less(b) {
		return b
	}
	return a
}
