package overlimit

import (
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Exact reports whether the shard's denial of hits under rule r may be
// held and repeated until its retry time: whether, while nothing but
// denied checks reach the key, the shard itself would deny the same hits
// with the same limit and remaining, its reset and retry times (and a
// leaky bucket's delay) unchanged as absolute times, until exactly then.
//
// That holds for every algorithm at hits 1: a key denied one hit has no
// hit left (remaining 0) until its retry time, when it has one. Denied
// checks change no state, and no algorithm's count of hits in use rises as
// time passes (a bucket drains, a window's weight falls or the window
// ends, a log's entries leave it), so the denial lasts until the retry
// time and no later; the reset time is an absolute time that only an
// allowed hit moves. The soft allowance is a fixed raise of the limit and
// changes none of it.
//
// At hits over 1, the denial itself lasts exactly as long, but remaining
// grows during the wait for the algorithms that refill or drain
// continuously (token_bucket, gcra, leaky_bucket, sliding_window,
// sliding_log), so only fixed_window (remaining is fixed until the window
// ends) is exact.
//
// Never exact: shadow rules (they never deny) and elastic rules (the limit
// follows the shard's load, which may fall at any time and admit the hits
// before the retry time).
func Exact(r *limiter.Rule, hits int64) bool {
	switch {
	case r.Shadow || r.ElasticPercent != 0 || hits < 1:
		return false
	case hits == 1:
		return true
	}
	return r.Algorithm == limiter.FixedWindow
}

// Denied turns a shard's denial, decided after now (the caller read now
// before it sent the check), into a Denial on the caller's clock. Its
// absolute times are then never later than the shard's: the shard's
// retry time can only come later, so a held denial never outlasts the
// shard's. It fails for a denial that has no finite retry time (hits the
// rule can never allow) or that does not fit the clock.
func Denied(now, limit, remaining, retryAfter, resetAfter, delay int64) (Denial, bool) {
	const maxWait = limiter.Never / 2 // now + any wait under it fits an int64
	if retryAfter <= 0 || retryAfter >= maxWait || resetAfter < 0 || resetAfter >= maxWait ||
		delay < 0 || delay >= maxWait || now < 0 || now >= maxWait {
		return Denial{}, false
	}
	return Denial{
		Limit: limit, Remaining: remaining,
		RetryAt: now + retryAfter, ResetAt: now + resetAfter, DelayAt: now + delay,
	}, true
}

// At returns the denial's waits as the shard would give them at now: each
// absolute time minus now, at least 0.
func (d Denial) At(now int64) (retryAfter, resetAfter, delay int64) {
	return max(d.RetryAt-now, 0), max(d.ResetAt-now, 0), max(d.DelayAt-now, 0)
}

// NextAfter returns the wait, from now, until the key's remaining grows,
// as the shard would give it for a check of hits: what Exact holds for
// also fixes that time. At 1 hit it is the retry time, since the key has
// no hit left until then; at more, once the window ends or the queue is
// empty, the reset time.
func (d Denial) NextAfter(now, hits int64) int64 {
	retry, reset, _ := d.At(now)
	if hits == 1 {
		return retry
	}
	return reset
}

// Rule is a rule as Versions sees it: its identity and the parameters the
// shard decides with.
type Rule struct {
	Service, Name string
	Params        limiter.Rule
}

// ruleID names a rule: its counters are keyed by service and name.
type ruleID struct{ service, name string }

// Versions numbers the versions of rules as rule sets load, so that a held
// denial is used only under the rule version it was decided with. A rule
// keeps its version from one set to the next while its parameters stay
// the same, and gets a new one, never used before, when they change or it
// reappears, so a rule change (a raised limit, say) sets aside exactly the
// denials of that rule. The zero Versions is ready; it is not safe for
// concurrent use (one goroutine loads rule sets).
type Versions struct {
	next uint64
	last map[ruleID]versioned
}

type versioned struct {
	params  limiter.Rule
	version uint64
}

// Assign returns the version of each rule of a newly loaded set, at the
// same index, and remembers the set for the next call.
func (v *Versions) Assign(rs []Rule) []uint64 {
	out := make([]uint64, len(rs))
	last := make(map[ruleID]versioned, len(rs))
	for i, r := range rs {
		id := ruleID{r.Service, r.Name}
		prev, ok := v.last[id]
		if !ok || prev.params != r.Params {
			v.next++
			prev = versioned{params: r.Params, version: v.next}
		}
		out[i] = prev.version
		last[id] = prev
	}
	v.last = last
	return out
}
