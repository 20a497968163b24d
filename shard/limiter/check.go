package limiter

import (
	"errors"
	"fmt"
	"time"
)

// MaxClockSkew bounds how far ahead of a shard's clock the times of a
// state handed over by another shard may be: the clocks of two shards
// differ by less.
const MaxClockSkew = time.Minute

// maxAhead bounds how far ahead of now a bucket's time can be: the longest
// refill, MaxSpan, quadrupled by soft and elastic growth.
const maxAhead = 4 * int64(MaxSpan)

// ErrImpossibleState marks a state that no algorithm produces: imported,
// it would give quota back (a negative count) or hold a key far longer than
// any rule can.
var ErrImpossibleState = errors.New("no algorithm produces this state")

// CheckState reports why s cannot be a state of algorithm a at now, on a
// shard whose clock is at most MaxClockSkew ahead, naming the field (a or
// b); nil when some rule could have left it. The rule is not known (a
// hand-off carries states only), so the bounds are those of every rule:
//
//   - buckets: a time in 0..now+4·MaxSpan+MaxClockSkew, and a remainder
//     under the limit it is counted in (a zero limit holds none);
//   - fixed_window: a window start in 0..now+MaxClockSkew and a count in
//     0..MaxEffectiveLimit: a negative count would leave more remaining
//     than the limit;
//   - sliding_window: a window start in 0..now+MaxClockSkew (both counts
//     are unsigned 32-bit halves of b, so any b is some pair of counts).
func CheckState(a Algorithm, s State, now int64) error {
	skew := int64(MaxClockSkew)
	switch a {
	case TokenBucket, GCRA, LeakyBucket:
		den, f := hi32(s.B), s.B&low32
		switch {
		case s.A < 0:
			return fmt.Errorf("a: %w: the bucket's time %d is negative", ErrImpossibleState, s.A)
		case s.A-now > maxAhead+skew:
			return fmt.Errorf("a: %w: the bucket's time is %v ahead, past the longest refill of any rule (%v)", ErrImpossibleState, time.Duration(s.A-now), time.Duration(maxAhead))
		case (den == 0 && f != 0) || (den > 0 && f >= den):
			return fmt.Errorf("b: %w: the remainder %d is not under the limit %d it is counted in", ErrImpossibleState, f, den)
		}
	case FixedWindow, SlidingWindow:
		switch {
		case s.A < 0:
			return fmt.Errorf("a: %w: the window start %d is negative", ErrImpossibleState, s.A)
		case s.A-now > skew:
			return fmt.Errorf("a: %w: the window starts %v ahead, past the clock skew allowed (%v)", ErrImpossibleState, time.Duration(s.A-now), MaxClockSkew)
		case a == FixedWindow && (s.B < 0 || s.B > MaxEffectiveLimit):
			return fmt.Errorf("b: %w: the count %d is not in 0..%d", ErrImpossibleState, s.B, int64(MaxEffectiveLimit))
		}
	default:
		return fmt.Errorf("algorithm: %w: %v keeps no State", ErrImpossibleState, a)
	}
	return nil
}

// CheckLog reports why times cannot be a sliding_log key's times at now,
// naming the field; nil when some rule could have left them: at most
// MaxLogSize times, oldest first, each in 0..now+MaxClockSkew.
func CheckLog(times []int64, now int64) error {
	if len(times) > MaxLogSize {
		return fmt.Errorf("times: %w: %d times, over the largest log of %d", ErrImpossibleState, len(times), MaxLogSize)
	}
	for i, t := range times {
		switch {
		case t < 0:
			return fmt.Errorf("times[%d]: %w: %d is negative", i, ErrImpossibleState, t)
		case t-now > int64(MaxClockSkew):
			return fmt.Errorf("times[%d]: %w: %v ahead, past the clock skew allowed (%v)", i, ErrImpossibleState, time.Duration(t-now), MaxClockSkew)
		case i > 0 && t < times[i-1]:
			return fmt.Errorf("times[%d]: %w: earlier than times[%d]; times are oldest first", i, ErrImpossibleState, i-1)
		}
	}
	return nil
}

// CheckFresh reports why fresh cannot be when a state of any algorithm is
// fresh again, at now; nil when it can be: 0..now+4·MaxSpan+2·MaxPeriod+
// MaxClockSkew (a full bucket's refill, or a window and the next).
func CheckFresh(fresh, now int64) error {
	if limit := maxAhead + 2*int64(MaxPeriod) + int64(MaxClockSkew); fresh < 0 || fresh-now > limit {
		return fmt.Errorf("fresh_unix_ns: %w: %d is not in 0..now+%v", ErrImpossibleState, fresh, time.Duration(limit))
	}
	return nil
}
