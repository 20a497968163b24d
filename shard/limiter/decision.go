package limiter

// State is the fixed-size per-key state of every algorithm but sliding_log
// (which keeps a Log). Its meaning depends on the algorithm (see the
// package doc); the zero value is a fresh key.
//
// Two words are enough for all of them: the one algorithm that needs three
// numbers, sliding_window (window start, previous and current count), packs
// its two counts into B, since Validate keeps every count and every
// effective limit under 2^32. Sixteen bytes keep a counter key, with its
// map slot, within the 64 bytes per key the shard budgets.
type State struct {
	A, B int64
}

// Decision is the outcome of one check against one rule.
type Decision struct {
	Allowed bool
	// Limit is the limit per period that was enforced: the rule's, raised
	// by its soft and elastic allowances if it has any.
	Limit int64
	// Remaining is how many hits would still be allowed now.
	Remaining int64
	// ResetAfter is the time in ns until the key is back to a fresh state;
	// 0 when it is fresh.
	ResetAfter int64
	// NextAfter is the time in ns until Remaining grows by at least 1 if
	// nothing else consumes in between: the least wait after which a read
	// reports more remaining than this decision does. 0 when Remaining
	// cannot grow (the key is fresh, or as fresh as its algorithm keeps
	// it). A caller told Remaining 0 that waits NextAfter is allowed one
	// hit. It is exact: a read even 1 ns earlier reports no more. Like
	// RetryAfter it holds at the limit decided with: an elastic limit that
	// shrinks as load rises can make the wait longer.
	NextAfter int64
	// RetryAfter is, when denied, the wait in ns after which the same hits
	// are allowed if nothing else consumes in between; 0 when allowed.
	// Never is returned when the hits can never be allowed (hits over the
	// capacity, or over the limit of a window algorithm).
	RetryAfter int64
	// Delay is, for leaky_bucket, the wait in ns the request has in the
	// queue before it is served: when allowed, the caller waits this long
	// before going ahead; when denied, the wait it would have had. For
	// hits == 0 it is the wait a request would have now. 0 for the other
	// algorithms and in shadow mode.
	Delay int64
	// SoftAllowanceUsed says the hits were allowed and leave the key over
	// the limit without the rule's SoftPercent allowance: the allowance is
	// in use.
	SoftAllowanceUsed bool
	// Shadow says the rule is in shadow mode: Allowed is always true and
	// RetryAfter and Delay are 0; Remaining and ResetAfter describe the
	// counter as enforcement would see it.
	Shadow bool
	// ShadowDenied says, in shadow mode, that the rule would have denied.
	ShadowDenied bool
}

// Never is the RetryAfter of hits that can never be allowed.
const Never = int64(1<<63 - 1)

// Decide applies hits at time now to the key whose state is s, updating s
// when the hits are allowed, or when a bucket's backlog is carried over to
// a changed limit (loadBacklog). It is DecideLoad at load 1: an elastic
// rule does not grow.
//
// hits == 0 reads without consuming: the decision is allowed and reports
// Remaining and ResetAfter. Negative hits are denied with RetryAfter Never
// (callers reject them before they get here). now is ns since the Unix
// epoch, 0..MaxNow; if it goes back, no hit is admitted earlier than at the
// latest now seen. The rule must have passed Validate and must not be
// sliding_log (see DecideLog): Decide panics otherwise, a caller's bug.
func Decide(s *State, now int64, r *Rule, hits int64) Decision {
	return DecideLoad(s, now, r, hits, 1)
}

// DecideLoad is Decide for a caller that knows its load, in [0, 1]: an
// elastic rule grows while load is under its threshold (see
// EffectiveLimit). A load outside [0, 1] is clamped; NaN counts as 1.
func DecideLoad(s *State, now int64, r *Rule, hits int64, load float64) Decision {
	var d Decision
	if !r.hasKinds() {
		decide(&d, s, now, r, hits)
		return d
	}
	var base, eff Rule
	r.effective(load, &base, &eff)
	decide(&d, s, now, &eff, hits)
	r.finish(&d, r.SoftPercent > 0 && d.Allowed && hits > 0 && overBase(s, now, &eff, &base))
	return d
}

// decide runs the algorithm r names, with r's limit and capacity as they
// are, into d.
//
// The algorithms fill a *Decision instead of returning one: a Decision
// takes nine registers, and handing it back by value through this dispatch
// spilled and reloaded it at a cost of about 10 ns a decision (34 → 25 ns
// for token_bucket on the 2-core development machine).
func decide(d *Decision, s *State, now int64, r *Rule, hits int64) {
	switch r.Algorithm {
	case TokenBucket:
		tokenBucket(d, s, now, r, hits)
	case LeakyBucket:
		leakyBucket(d, s, now, r, hits)
	case FixedWindow:
		fixedWindow(d, s, now, r, hits)
	case SlidingWindow:
		slidingWindow(d, s, now, r, hits)
	case GCRA:
		gcra(d, s, now, r, hits)
	case SlidingLog:
		panic("limiter: sliding_log keeps its state in a Log: call DecideLog")
	default:
		panic("limiter: rule did not pass Validate: algorithm " + r.Algorithm.String())
	}
}
