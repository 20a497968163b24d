package limiter

// Merge returns the more restrictive of two states of one key under
// algorithm a, for a hand-off that copies a key onto a shard that may hold
// it already: the state that admits no more hits than the other.
//
//   - Buckets: the later time (a fuller bucket, a longer queue).
//   - fixed_window: the later window; in the same window the higher count.
//   - sliding_window: the later window; in the same window the higher of
//     each count. (Across windows the earlier state's counts are dropped,
//     which can under-count by what it saw in the window before; the
//     Period is not in the state to align them.)
func Merge(a Algorithm, x, y State) State {
	switch a {
	case TokenBucket, GCRA, LeakyBucket:
		if laterTime(y, x) {
			return y
		}
		return x
	case FixedWindow:
		if y.A > x.A || (y.A == x.A && y.B > x.B) {
			return y
		}
		return x
	case SlidingWindow:
		switch {
		case y.A > x.A:
			return y
		case y.A < x.A:
			return x
		}
		prev := max(uint64(x.B)>>32, uint64(y.B)>>32)
		cur := max(uint64(x.B)&0xffffffff, uint64(y.B)&0xffffffff)
		return State{A: x.A, B: int64(prev<<32 | cur)}
	}
	return x
}

// laterTime reports whether bucket state x holds a later time than y. The
// remainder of each is counted in its own limit (B's high 32 bits), so the
// fractions are compared by cross-multiplying.
func laterTime(x, y State) bool {
	if x.A != y.A {
		return x.A > y.A
	}
	xr, xd := uint64(x.B)&0xffffffff, uint64(x.B)>>32
	yr, yd := uint64(y.B)&0xffffffff, uint64(y.B)>>32
	if xd == 0 || yd == 0 {
		return xr > 0 && yr == 0
	}
	return xr*yd > yr*xd
}

// MergeLog merges the times of two sliding_log rings of one key into dst,
// oldest first, keeping the newest len(dst.Times) of their union: every
// hit either shard allowed still counts, up to what the ring holds. A time
// both hold counts as often as the one that holds it more often, so
// merging the same log twice (a hand-off copies twice) changes nothing.
// Both inputs hold their times oldest first (src as a plain slice).
func MergeLog(dst *Log, src []int64) {
	n := len(dst.Times)
	if n == 0 {
		return
	}
	merged := make([]int64, 0, dst.Len+len(src))
	i, j := 0, 0
	for i < dst.Len || j < len(src) {
		switch {
		case j == len(src) || (i < dst.Len && dst.at(i) < src[j]):
			merged = append(merged, dst.at(i))
			i++
		case i == dst.Len || src[j] < dst.at(i):
			merged = append(merged, src[j])
			j++
		default: // the same time on both: one entry for each pair
			merged = append(merged, src[j])
			i++
			j++
		}
	}
	if len(merged) > n {
		merged = merged[len(merged)-n:]
	}
	copy(dst.Times, merged)
	dst.Head, dst.Len = 0, len(merged)
}

// Snapshot returns the log's times, oldest first, in a new slice.
func (l *Log) Snapshot() []int64 {
	out := make([]int64, l.Len)
	for i := range out {
		out[i] = l.at(i)
	}
	return out
}
