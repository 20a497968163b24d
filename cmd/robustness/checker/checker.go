package checker

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Algorithm is a rule's algorithm, as the rules file names it.
type Algorithm string

// The algorithms a rule may use.
const (
	TokenBucket   Algorithm = "token_bucket"
	LeakyBucket   Algorithm = "leaky_bucket"
	FixedWindow   Algorithm = "fixed_window"
	SlidingLog    Algorithm = "sliding_log"
	SlidingWindow Algorithm = "sliding_window"
	GCRA          Algorithm = "gcra"
)

// Rule is what the checker needs of a rule: the most it may allow.
type Rule struct {
	Algorithm Algorithm
	Limit     int64
	Period    time.Duration
	// Burst is the bucket's capacity (token_bucket, gcra) or the queue's
	// size (leaky_bucket); zero means Limit. The window algorithms have
	// none.
	Burst int64
	// SoftPercent and ElasticPercent raise the limit (and burst) by at
	// most that many percent each.
	SoftPercent, ElasticPercent int64
	// Spans, when the limit changed during the run, say when each limit
	// may have been in force: an interval is held to the highest limit
	// of the spans it meets (Limit when it meets none). A limit lowered is
	// in force from the instant every router has it; until then the old
	// one may be, so the suite ends the old span there, not at the change.
	Spans []Span
}

// Span is a limit and when it may have been in force: at some instants of
// [From, To], not necessarily all (zero times: unbounded).
type Span struct {
	Limit    int64
	From, To time.Time
}

func (s Span) meets(a, b time.Time) bool {
	return (s.From.IsZero() || !s.From.After(b)) && (s.To.IsZero() || !s.To.Before(a))
}

// limits returns the rule's limit and burst over [a, b] (the highest of
// the spans it meets), raised by its soft and elastic percents (rounded
// up: the most the rule may allow).
func (r Rule) limits(a, b time.Time) (limit, burst int64) {
	limit = r.Limit
	if len(r.Spans) > 0 {
		limit = 0
		for _, s := range r.Spans {
			if s.meets(a, b) {
				limit = max(limit, s.Limit)
			}
		}
		if limit == 0 {
			limit = r.Limit
		}
	}
	burst = r.Burst
	if burst == 0 {
		burst = limit
	}
	pct := 100 + r.SoftPercent + r.ElasticPercent
	up := func(n int64) int64 { return (n*pct + 99) / 100 }
	return up(limit), up(burst)
}

// Outcome is what a check's caller got.
type Outcome int

// The outcomes of a check.
const (
	Allowed Outcome = iota // decided by a shard: allowed
	Denied                 // decided by a shard: denied
	Policy                 // answered by the rule's failure policy
	Error                  // no answer: an error or the client's timeout
)

func (o Outcome) String() string {
	return [...]string{"allowed", "denied", "policy", "error"}[o]
}

// Op is one check as its client recorded it.
type Op struct {
	Key     string // the counter: service, rule and user
	Rule    string // the rule's name in Check's rules
	Hits    int64
	Send    time.Time // before the request left the client
	Recv    time.Time // after the answer arrived
	Outcome Outcome
}

// Violation is an interval in which the checks certainly decided inside it
// allowed more hits than the rule allows in its length.
type Violation struct {
	Key, Rule string
	From, To  time.Time
	Allowed   int64 // hits of the allowed checks sent and answered inside [From, To]
	Bound     int64 // the most the rule allows in To − From (or in the aligned window), resets included
	Resets    int   // the resets that may have fallen inside [From, To], each allowed one more burst or window
	Ops       []Op  // those checks, in send order
}

// Reset is a fault that may restart counters from zero once, at some
// instant in [From, To] that the client cannot see: a shard killed
// without a hand-off (DESIGN.md, "Bounded loss on crash"), or one stalled
// or cut off from everyone past its lease, whose partitions are then
// taken over from zero. It applies to every key, as the checker does not
// know which shard owned which key.
type Reset struct {
	Name     string
	From, To time.Time
}

// overlapping counts the resets whose span meets [a, b].
func overlapping(resets []Reset, a, b time.Time) int {
	n := 0
	for _, r := range resets {
		if !r.From.After(b) && !r.To.Before(a) {
			n++
		}
	}
	return n
}

func (v Violation) String() string {
	return fmt.Sprintf("key %s (rule %s): %d hits allowed by decision in [%s, %s] (%v), more than the rule's %d (%d resets allowed for)",
		v.Key, v.Rule, v.Allowed, v.From.Format(time.RFC3339Nano), v.To.Format(time.RFC3339Nano), v.To.Sub(v.From), v.Bound, v.Resets)
}

// Check returns every key's worst violation (at most one per key, the one
// with the most hits over the bound), in key order. Ops of a rule missing
// from rules are reported as an error.
//
// resets are the faults that may have restarted counters from zero: an
// interval that one may have fallen inside is allowed, per reset, one more
// burst (buckets) or one more limit (windows and the log), the most a
// counter started again from zero can add (a bucket full again, a window
// counting from zero). That is the design's bound on a crash, checked;
// nothing is skipped. An interval no reset meets gets no allowance.
func Check(rules map[string]Rule, ops []Op, resets []Reset) ([]Violation, error) {
	byKey := map[string][]Op{}
	for _, op := range ops {
		if op.Outcome != Allowed || op.Hits <= 0 {
			continue
		}
		if _, ok := rules[op.Rule]; !ok {
			return nil, fmt.Errorf("check of key %s: rule %q unknown to the checker", op.Key, op.Rule)
		}
		if op.Recv.Before(op.Send) {
			return nil, fmt.Errorf("check of key %s: received at %v, before it was sent at %v", op.Key, op.Recv, op.Send)
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	var out []Violation
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		kops := byKey[key]
		slices.SortFunc(kops, func(a, b Op) int { return a.Send.Compare(b.Send) })
		// A key's checks share its rule (the key names it).
		r := rules[kops[0].Rule]
		var v *Violation
		switch r.Algorithm {
		case TokenBucket, GCRA, LeakyBucket:
			v = worstInterval(kops, resets, func(a, b time.Time) (int64, int64) {
				limit, burst := r.limits(a, b)
				return burst + int64(float64(limit)*float64(b.Sub(a))/float64(r.Period)), burst
			}, -1)
		case SlidingLog:
			v = worstInterval(kops, resets, func(a, b time.Time) (int64, int64) {
				limit, _ := r.limits(a, b)
				return limit, limit
			}, r.Period-1)
		case FixedWindow, SlidingWindow:
			v = worstWindow(kops, resets, r)
		default:
			return nil, fmt.Errorf("rule %s: algorithm %q unknown to the checker", kops[0].Rule, r.Algorithm)
		}
		if v != nil {
			v.Key, v.Rule = key, kops[0].Rule
			out = append(out, *v)
		}
	}
	return out, nil
}

// worstInterval looks at every interval [a, b] with a a check's send and
// b a check's receive (no longer than maxLen, when maxLen >= 0), and
// returns the one whose certainly-inside hits exceed bound(a, b)'s first
// value, plus its second for each reset that meets [a, b], the most, or
// nil. ops are sorted by send.
func worstInterval(ops []Op, resets []Reset, bound func(a, b time.Time) (bound, perReset int64), maxLen time.Duration) *Violation {
	byRecv := slices.Clone(ops)
	slices.SortStableFunc(byRecv, func(x, y Op) int { return x.Recv.Compare(y.Recv) })
	var worst *Violation
	inside := make([]Op, 0, len(ops))
	for i, first := range ops {
		if i > 0 && first.Send.Equal(ops[i-1].Send) {
			continue // the same start as the previous check's
		}
		a := first.Send
		inside = inside[:0]
		var hits int64
		// Each prefix in receive order of the checks sent at or after a
		// ends an interval [a, its last receive]. (Of checks received at
		// the same instant, the last one's interval holds them all, and
		// exceeds the bound the most.)
		for _, op := range byRecv {
			if op.Send.Before(a) {
				continue
			}
			if maxLen >= 0 && op.Recv.Sub(a) > maxLen {
				break // and so are all received later
			}
			inside = append(inside, op)
			hits += op.Hits
			lim, perReset := bound(a, op.Recv)
			if hits <= lim {
				continue
			}
			// Resets are few: counted only where the bound alone is
			// passed.
			n := overlapping(resets, a, op.Recv)
			if lim += int64(n) * perReset; hits > lim && worst.lessOver(hits, lim) {
				worst = &Violation{From: a, To: op.Recv, Allowed: hits, Bound: lim, Resets: n, Ops: sortedBySend(inside)}
			}
		}
	}
	return worst
}

// lessOver reports whether v (nil: none yet) exceeds its bound by less
// than allowed exceeds bound.
func (v *Violation) lessOver(allowed, bound int64) bool {
	return v == nil || allowed-bound > v.Allowed-v.Bound
}

// worstWindow checks each window [k·P, (k+1)·P) aligned on the Unix epoch
// that holds a check certainly decided inside it, and returns the one
// most over the limit (plus one limit per reset that meets the window),
// or nil.
func worstWindow(ops []Op, resets []Reset, r Rule) *Violation {
	p := int64(r.Period)
	windows := map[int64][]Op{}
	for _, op := range ops {
		k := floorDiv(op.Send.UnixNano(), p)
		if floorDiv(op.Recv.UnixNano(), p) == k {
			windows[k] = append(windows[k], op)
		}
	}
	var worst *Violation
	for _, k := range slices.Sorted(maps.Keys(windows)) {
		var hits int64
		for _, op := range windows[k] {
			hits += op.Hits
		}
		from, to := time.Unix(0, k*p), time.Unix(0, (k+1)*p-1)
		limit, _ := r.limits(from, to)
		n := overlapping(resets, from, to)
		if lim := limit * int64(1+n); hits > lim && worst.lessOver(hits, lim) {
			worst = &Violation{From: from, To: to, Allowed: hits, Bound: lim, Resets: n, Ops: windows[k]}
		}
	}
	return worst
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func sortedBySend(ops []Op) []Op {
	out := slices.Clone(ops)
	slices.SortStableFunc(out, func(x, y Op) int { return x.Send.Compare(y.Send) })
	return out
}

// Fault is a fault in force over [From, To), as the suite's schedule
// names it.
type Fault struct {
	Name     string
	From, To time.Time
}

// Tally counts checks by outcome.
type Tally map[Outcome]int

// TallyByFault counts the checks sent while each fault was in force (a
// check sent under two faults counts for both), and those sent under none
// under "".
func TallyByFault(ops []Op, faults []Fault) map[string]Tally {
	out := map[string]Tally{}
	add := func(name string, o Outcome) {
		if out[name] == nil {
			out[name] = Tally{}
		}
		out[name][o]++
	}
	for _, op := range ops {
		in := false
		for _, f := range faults {
			if !op.Send.Before(f.From) && op.Send.Before(f.To) {
				add(f.Name, op.Outcome)
				in = true
			}
		}
		if !in {
			add("", op.Outcome)
		}
	}
	return out
}

// Report writes the violations for a run of seed: each key, its interval,
// the checks in it and the faults in force over it.
func Report(w io.Writer, seed uint64, faults []Fault, vs []Violation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d keys past their limit\n", seed, len(vs))
	for _, v := range vs {
		fmt.Fprintf(&b, "\n%s\n", v)
		for _, f := range faults {
			if f.From.Before(v.To) && v.From.Before(f.To) {
				fmt.Fprintf(&b, "  fault in force: %s [%s, %s)\n", f.Name, f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
			}
		}
		for _, op := range v.Ops {
			fmt.Fprintf(&b, "  %s hits=%d sent %s answered %s (%v)\n", op.Outcome, op.Hits,
				op.Send.Format(time.RFC3339Nano), op.Recv.Format(time.RFC3339Nano), op.Recv.Sub(op.Send))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
