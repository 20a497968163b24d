package limiter

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// Algorithm selects how a rule counts.
type Algorithm uint8

// The algorithms a rule may name.
const (
	Unspecified Algorithm = iota
	TokenBucket
	LeakyBucket
	FixedWindow
	SlidingLog
	SlidingWindow
	GCRA
)

var algorithmNames = [...]string{
	Unspecified:   "unspecified",
	TokenBucket:   "token_bucket",
	LeakyBucket:   "leaky_bucket",
	FixedWindow:   "fixed_window",
	SlidingLog:    "sliding_log",
	SlidingWindow: "sliding_window",
	GCRA:          "gcra",
}

// String returns the name used in rule files and metrics.
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", a)
}

// UsesLog reports whether the algorithm keeps its per-key state in a Log
// (decided by DecideLog) instead of a State (decided by Decide).
func (a Algorithm) UsesLog() bool { return a == SlidingLog }

// UsesBurst reports whether the algorithm is a bucket whose capacity is
// Rule.Capacity(); the window algorithms ignore Burst.
func (a Algorithm) UsesBurst() bool {
	return a == TokenBucket || a == LeakyBucket || a == GCRA
}

// ParseAlgorithm maps a rule-file name to an Algorithm.
func ParseAlgorithm(s string) (Algorithm, error) {
	for i, n := range algorithmNames {
		if i != int(Unspecified) && n == s {
			return Algorithm(i), nil
		}
	}
	return Unspecified, fmt.Errorf("%w: %q (want one of token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_window, gcra)", ErrUnknownAlgorithm, s)
}

// Bounds on rule parameters. They keep every intermediate product inside
// 128 bits and every result inside an int64 of nanoseconds, for any now in
// 0..MaxNow.
const (
	MaxLimit  = 1_000_000_000
	MinPeriod = time.Millisecond
	MaxPeriod = 366 * 24 * time.Hour
	MaxBurst  = 1_000_000_000

	// MaxSpan bounds the time a bucket takes to refill from empty,
	// Capacity()·Period/Limit (about 9 years). It only binds when Burst
	// is larger than Limit. Soft and elastic growth, rounded down
	// separately for the limit and the capacity, can at most quadruple it.
	MaxSpan = time.Duration(1 << 58)
	// MaxSoftPercent bounds SoftPercent: a soft limit at most doubles.
	MaxSoftPercent = 100
	// MaxElasticPercent bounds ElasticPercent: an elastic limit grows at
	// most elevenfold.
	MaxElasticPercent = 1000
	// MaxEffectiveLimit bounds the limit after soft and elastic growth, so
	// that counts and the limit itself fit in 32 bits of State.
	MaxEffectiveLimit = 1<<32 - 1
	// MaxLogSize bounds the ring of a sliding_log key (8 bytes per entry):
	// the limit after soft and elastic growth.
	MaxLogSize = 100_000
	// MaxNow is the latest time (ns since the Unix epoch, in 2116) the
	// algorithms accept as now.
	MaxNow = int64(1 << 62)
)

// Sentinel errors for invalid rules; Validate wraps them with the field.
var (
	ErrUnknownAlgorithm = errors.New("unknown algorithm")
	ErrOutOfRange       = errors.New("out of range")
	ErrNotApplicable    = errors.New("not used by this algorithm")
)

// Rule is what the algorithms need of a rule.
type Rule struct {
	Algorithm Algorithm
	// Limit is the number of hits allowed per Period. Required, 1..MaxLimit.
	Limit int64
	// Period is the window or refill period in nanoseconds.
	// Required, MinPeriod..MaxPeriod.
	Period int64
	// Burst is the capacity of the bucket algorithms (token_bucket,
	// gcra: hits allowed back to back; leaky_bucket: queue size).
	// Zero means Limit. 0..MaxBurst; the window algorithms ignore it.
	Burst int64

	// MaxDelay is, for leaky_bucket only, the longest wait in ns that an
	// admitted request may have in the queue before it is served: a request
	// that fits in the queue and would wait at most MaxDelay is allowed
	// with Decision.Delay set, and the caller sleeps that long before going
	// ahead. Zero (the default) means the queue's whole drain time,
	// Capacity()·Period/Limit: every request that fits in the queue is
	// admitted: Capacity() requests of 1 hit at once on an empty queue are
	// all allowed, with delays 0, T, 2T, … (T = Period/Limit). A MaxDelay under
	// (Capacity()-1)·Period/Limit caps the wait below what the queue
	// holds; from there on the queue size alone decides. For a smooth
	// output that never waits, use Burst 1. 0..MaxPeriod.
	MaxDelay int64

	// SoftPercent is an allowance over the limit, in percent: Limit and
	// Capacity() are raised by that much (rounded down), and allowed hits
	// that leave the key over the unraised limit are marked with
	// Decision.SoftAllowanceUsed. Zero (the default) means a hard limit.
	// 0..MaxSoftPercent.
	SoftPercent int64

	// ElasticPercent makes the limit elastic: while the caller's load is
	// under ElasticLoadPercent, Limit and Capacity() grow by up to this
	// many percent, in proportion to how far the load is under the
	// threshold (the full growth at load 0, none at the threshold), and
	// fall back at once when the load reaches it. See EffectiveLimit.
	// Zero (the default) means not elastic. 0..MaxElasticPercent.
	ElasticPercent int64
	// ElasticLoadPercent is the load threshold of an elastic rule in
	// percent. 1..100 when ElasticPercent is set, else 0.
	ElasticLoadPercent int64

	// Shadow decides and counts as usual but always allows: the decision
	// is marked Shadow, and ShadowDenied says whether the rule would have
	// denied. Hits the rule would have denied are not counted, so the
	// counter stays what enforcement would see. Default false.
	Shadow bool
}

// Capacity returns the effective burst: Burst, or Limit when Burst is zero.
func (r *Rule) Capacity() int64 {
	if r.Burst > 0 {
		return r.Burst
	}
	return r.Limit
}

// WireMaxDelay returns the MaxDelay to send a shard for r: a leaky_bucket
// rule's default (0, the queue's whole drain time) made explicit, rounded
// up to a ns (the same answers: a request that fits waits less than the
// drain time), when it is at most MaxPeriod; r.MaxDelay otherwise. An
// older shard reads 0 as "no queue", so a router that sends the drain time
// itself has every shard version decide the rule alike.
func (r *Rule) WireMaxDelay() int64 {
	if r.Algorithm != LeakyBucket || r.MaxDelay != 0 || r.Limit <= 0 || r.Period <= 0 {
		return r.MaxDelay
	}
	if hi, _ := bits.Mul64(uint64(r.Capacity()), uint64(r.Period)); hi >= uint64(r.Limit) {
		return 0 // the quotient does not fit 64 bits: far past MaxPeriod
	}
	if drain := mulDivCeil(r.Capacity(), r.Period, r.Limit); drain > 0 && drain <= int64(MaxPeriod) {
		return drain
	}
	return 0
}

// LogSize returns the number of timestamps a sliding_log key can hold
// under r: the limit with the full soft and elastic growth. The caller
// grows each key's Log.Times with use, up to this length.
func (r *Rule) LogSize() int64 {
	limit, _ := EffectiveLimit(r, 0)
	return limit
}

// Validate reports the first parameter that is out of bounds, naming it.
func (r *Rule) Validate() error {
	switch {
	case r.Algorithm == Unspecified || int(r.Algorithm) >= len(algorithmNames):
		return fmt.Errorf("algorithm: %w: %d", ErrUnknownAlgorithm, r.Algorithm)
	case r.Limit < 1 || r.Limit > MaxLimit:
		return fmt.Errorf("limit: %w: %d not in 1..%d", ErrOutOfRange, r.Limit, MaxLimit)
	case r.Period < int64(MinPeriod) || r.Period > int64(MaxPeriod):
		return fmt.Errorf("period: %w: %v not in %v..%v", ErrOutOfRange, time.Duration(r.Period), MinPeriod, MaxPeriod)
	case r.Burst < 0 || r.Burst > MaxBurst:
		return fmt.Errorf("burst: %w: %d not in 0..%d", ErrOutOfRange, r.Burst, MaxBurst)
	case r.MaxDelay < 0 || r.MaxDelay > int64(MaxPeriod):
		return fmt.Errorf("max_delay: %w: %v not in 0s..%v", ErrOutOfRange, time.Duration(r.MaxDelay), MaxPeriod)
	case r.MaxDelay != 0 && r.Algorithm != LeakyBucket:
		return fmt.Errorf("max_delay: %w: only leaky_bucket queues, not %v", ErrNotApplicable, r.Algorithm)
	case r.SoftPercent < 0 || r.SoftPercent > MaxSoftPercent:
		return fmt.Errorf("soft_percent: %w: %d not in 0..%d", ErrOutOfRange, r.SoftPercent, MaxSoftPercent)
	case r.ElasticPercent < 0 || r.ElasticPercent > MaxElasticPercent:
		return fmt.Errorf("elastic_percent: %w: %d not in 0..%d", ErrOutOfRange, r.ElasticPercent, MaxElasticPercent)
	case r.ElasticPercent > 0 && (r.ElasticLoadPercent < 1 || r.ElasticLoadPercent > 100):
		return fmt.Errorf("elastic_load_percent: %w: %d not in 1..100", ErrOutOfRange, r.ElasticLoadPercent)
	case r.ElasticPercent == 0 && r.ElasticLoadPercent != 0:
		return fmt.Errorf("elastic_load_percent: %w: %d set without elastic_percent", ErrOutOfRange, r.ElasticLoadPercent)
	}
	grown, _ := EffectiveLimit(r, 0)
	field := "soft_percent"
	if r.ElasticPercent > 0 {
		field = "elastic_percent"
	}
	switch {
	case grown > MaxEffectiveLimit:
		return fmt.Errorf("%s: %w: limit %d grows to %d, over %d", field, ErrOutOfRange, r.Limit, grown, int64(MaxEffectiveLimit))
	case r.Algorithm == SlidingLog && grown > MaxLogSize:
		return fmt.Errorf("limit: %w: sliding_log keeps one timestamp per hit: limit %d (%d with allowances) over %d", ErrOutOfRange, r.Limit, grown, MaxLogSize)
	case r.Algorithm.UsesBurst() && mulCmp(r.Capacity(), r.Period, int64(MaxSpan), r.Limit) > 0:
		return fmt.Errorf("burst: %w: refilling %d at %d per %v takes over %v", ErrOutOfRange, r.Capacity(), r.Limit, time.Duration(r.Period), MaxSpan)
	}
	return nil
}
