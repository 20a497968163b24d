package limiter

// Log is the per-key state of a sliding_log rule: the times of the hits
// allowed in the last Period, oldest first, in a ring. A hit of cost n
// takes n entries. The zero Log on a ring of the right length is a fresh
// key.
//
// The caller owns Times and sizes it: before deciding hits it gives the
// ring room for Live(now, r)+hits entries (up to r.LogSize(), the most any
// load allows), so a key's ring can grow with use instead of being
// allocated at its limit; DecideLog never allocates. Hits that do not fit
// a ring its caller could not grow are denied until entries leave it
// (never over-admitting); the decision still reports the rule's limit.
// Memory per key is 8 bytes per entry plus the 40-byte Log.
type Log struct {
	// Times is the ring; len(Times) is its capacity.
	Times []int64
	// Head is the index in Times of the oldest entry.
	Head int
	// Len is the number of entries, at most len(Times).
	Len int
}

// at returns the i-th oldest entry, 0 <= i < Len.
func (l *Log) at(i int) int64 {
	i += l.Head
	if i >= len(l.Times) {
		i -= len(l.Times)
	}
	return l.Times[i]
}

// Live drops the entries that left r's window at now and returns how many
// remain: what the ring must hold besides the hits about to be decided.
func (l *Log) Live(now int64, r *Rule) int {
	l.expire(now - r.Period)
	return l.Len
}

// newest returns the newest entry; Len must be > 0.
func (l *Log) newest() int64 { return l.at(l.Len - 1) }

// expire drops the entries at or before cutoff.
func (l *Log) expire(cutoff int64) {
	if l.Len < 0 || l.Len > len(l.Times) || l.Head < 0 || l.Head >= max(len(l.Times), 1) {
		l.Head, l.Len = 0, 0 // not a ring DecideLog wrote: start afresh
	}
	for l.Len > 0 && l.Times[l.Head] <= cutoff {
		l.Head++
		if l.Head == len(l.Times) {
			l.Head = 0
		}
		l.Len--
	}
}

// push appends n entries at t; there must be room.
func (l *Log) push(t int64, n int) {
	i := l.Head + l.Len
	for range n {
		if i >= len(l.Times) {
			i -= len(l.Times)
		}
		l.Times[i] = t
		i++
	}
	l.Len += n
}

// Move re-homes l onto buf, keeping the newest entries that fit, for a
// caller that resizes a key's ring after its rule's LogSize changed.
// Keeping the newest entries is exact: under a limit of len(buf), the
// older ones could never decide anything again.
func (l *Log) Move(buf []int64) {
	keep := min(l.Len, len(buf))
	for i := range keep {
		buf[i] = l.at(l.Len - keep + i)
	}
	*l = Log{Times: buf, Len: keep}
}

// DecideLog is Decide for sliding_log rules, whose per-key state is a Log:
// it applies hits at now to l, recording them only when allowed, at the
// caller's load (see DecideLoad). The preconditions are Decide's, with
// sliding_log as the only algorithm.
//
// The log holds the times of the hits allowed in (now − Period, now]; n
// hits are allowed when there are at most Limit − n of them. A denied
// request waits for the oldest entries to leave the window, each at its
// time + Period.
func DecideLog(l *Log, now int64, r *Rule, hits int64, load float64) Decision {
	if r.Algorithm != SlidingLog {
		panic("limiter: DecideLog called for " + r.Algorithm.String() + ": call Decide")
	}
	var d Decision
	if !r.hasKinds() {
		slidingLog(&d, l, now, r, hits)
		return d
	}
	var base, eff Rule
	r.effective(load, &base, &eff)
	slidingLog(&d, l, now, &eff, hits)
	r.finish(&d, r.SoftPercent > 0 && d.Allowed && hits > 0 && int64(l.Len) > base.Limit)
	return d
}

func slidingLog(d *Decision, l *Log, now int64, r *Rule, hits int64) {
	l.expire(now - r.Period)
	limit, room := r.Limit, int64(len(l.Times))
	count := int64(l.Len)
	*d = Decision{Limit: limit}
	switch {
	case hits < 0 || hits > limit:
		d.RetryAfter = Never
	case hits == 0:
		d.Allowed = true
	case count+hits > limit:
		// The (count+hits−limit)-th oldest entry must leave the window.
		d.RetryAfter = l.at(int(count+hits-limit-1)) + r.Period - now
	case hits > room:
		d.RetryAfter = Never // a ring too short for these hits alone
	case count+hits > room:
		// The ring could not grow: the (count+hits−room)-th oldest entry
		// must leave it.
		d.RetryAfter = l.at(int(count+hits-room-1)) + r.Period - now
	default:
		d.Allowed = true
		t := now
		if l.Len > 0 {
			t = max(t, l.newest()) // the clock went back: keep the ring in order
		}
		l.push(t, int(hits))
	}
	d.Remaining = max(limit-int64(l.Len), 0)
	if l.Len > 0 {
		d.ResetAfter = l.newest() + r.Period - now
		// Remaining grows once the entry that makes it limit − Len (or 0
		// when Len is over the limit) leaves the window.
		d.NextAfter = l.at(int(max(int64(l.Len)-limit, 0))) + r.Period - now
	}
}
