package limiter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// model is the slow, obviously-right reference for every algorithm: the
// list of the requests it allowed, from which each question is answered
// from scratch by the algorithm's definition, in plain int64 arithmetic
// (the property tests keep limits and periods small enough for that).
type model struct {
	alg                               Algorithm
	limit, capacity, period, maxDelay int64
	allowed                           []event
}

type event struct{ at, hits int64 }

func newModel(r *Rule) *model {
	return &model{alg: r.Algorithm, limit: r.Limit, capacity: r.Capacity(), period: r.Period, maxDelay: r.MaxDelay}
}

// most is the largest request that can ever be allowed.
func (m *model) most() int64 {
	if m.alg.UsesBurst() {
		return m.capacity
	}
	return m.limit
}

// sum returns the hits allowed at times in [from, to).
func (m *model) sum(from, to int64) int64 {
	n := int64(0)
	for _, e := range m.allowed {
		if e.at >= from && e.at < to {
			n += e.hits
		}
	}
	return n
}

// backlog returns, times Period, the hits a queue drained at Limit per
// Period would hold at t (Reich's formula: the most by which arrivals in
// any interval [t_j, t] exceed what drains in it). For the token bucket
// and GCRA it is how far the bucket is from full.
func (m *model) backlog(t int64) int64 {
	b, a := int64(0), int64(0)
	for j := len(m.allowed) - 1; j >= 0; j-- {
		a += m.allowed[j].hits
		b = max(b, a*m.period-m.limit*(t-m.allowed[j].at))
	}
	return b
}

// window returns the start of the fixed window holding t.
func (m *model) window(t int64) int64 { return t - t%m.period }

// allows reports whether n hits at t are allowed by the definition.
func (m *model) allows(t, n int64) bool {
	if n == 0 {
		return true
	}
	if n > m.most() {
		return false
	}
	p, l := m.period, m.limit
	switch m.alg {
	case TokenBucket, GCRA:
		// In every interval [t_j, t], at most Capacity + Limit·(t−t_j)/Period hits.
		a := n
		for j := len(m.allowed) - 1; j >= 0; j-- {
			a += m.allowed[j].hits
			if (a-m.capacity)*p > l*(t-m.allowed[j].at) {
				return false
			}
		}
		return true
	case LeakyBucket:
		// The request fits in the queue and waits at most MaxDelay, or
		// when that is 0, at most the whole queue's drain time.
		b := m.backlog(t)
		wait := l * m.maxDelay // the longest wait, times Limit
		if m.maxDelay == 0 {
			wait = m.capacity * p
		}
		return b+n*p <= m.capacity*p && b <= wait
	case FixedWindow:
		ws := m.window(t)
		return m.sum(ws, ws+p)+n <= l
	case SlidingWindow:
		ws := m.window(t)
		prev, cur := m.sum(ws-p, ws), m.sum(ws, ws+p)
		return prev*(p-(t-ws))+(cur+n)*p <= l*p
	case SlidingLog:
		return m.sum(t-p+1, t+1)+n <= l
	}
	panic("model: " + m.alg.String())
}

// fresh reports whether the key at t is as if it had never been used.
func (m *model) fresh(t int64) bool {
	p := m.period
	switch m.alg {
	case TokenBucket, GCRA, LeakyBucket:
		return m.backlog(t) == 0
	case FixedWindow:
		ws := m.window(t)
		return m.sum(ws, ws+p) == 0
	case SlidingWindow:
		ws := m.window(t)
		return m.sum(ws-p, ws)*(p-(t-ws)) == 0 && m.sum(ws, ws+p) == 0
	case SlidingLog:
		return m.sum(t-p+1, t+1) == 0
	}
	panic("model: " + m.alg.String())
}

// over reports whether the key at t uses more than base allows: the
// mark of the soft allowance.
func (m *model) over(t int64, base *Rule) bool {
	p := m.period
	switch m.alg {
	case TokenBucket, GCRA, LeakyBucket:
		return m.backlog(t) > base.Capacity()*p
	case FixedWindow:
		ws := m.window(t)
		return m.sum(ws, ws+p) > base.Limit
	case SlidingWindow:
		ws := m.window(t)
		return m.sum(ws-p, ws)*(p-(t-ws))+m.sum(ws, ws+p)*p > base.Limit*p
	case SlidingLog:
		return m.sum(t-p+1, t+1) > base.Limit
	}
	panic("model: " + m.alg.String())
}

// forget drops the history when the key is fresh at t: nothing before a
// fresh point can decide anything after it (every constraint above only
// looks back to the last time the key was fresh). It keeps the model fast.
func (m *model) forget(t int64) {
	if m.fresh(t) {
		m.allowed = m.allowed[:0]
	}
}

// check compares a decision the subject took for n hits at t, before which
// the model answered allowed and delay, with the model after it.
func (m *model) check(d Decision, t, n int64, allowed bool, delay int64) error {
	switch {
	case d.Allowed != allowed:
		return fmt.Errorf("allowed %v, model %v", d.Allowed, allowed)
	case d.Limit != m.limit:
		return fmt.Errorf("limit %d, model %d", d.Limit, m.limit)
	case allowed && d.RetryAfter != 0:
		return fmt.Errorf("allowed with retry_after %d", d.RetryAfter)
	case !allowed && n > m.most() && d.RetryAfter != Never:
		return fmt.Errorf("%d hits over %d: retry_after %d, want Never", n, m.most(), d.RetryAfter)
	case !allowed && n <= m.most() && (d.RetryAfter <= 0 || !m.allows(t+d.RetryAfter, n)):
		return fmt.Errorf("retry_after %d: model denies then", d.RetryAfter)
	case !allowed && n <= m.most() && m.allows(t+d.RetryAfter-1, n):
		return fmt.Errorf("retry_after %d: model allows 1 ns earlier", d.RetryAfter)
	case d.Remaining < 0 || (d.Remaining > 0 && !m.allows(t, d.Remaining)) || m.allows(t, d.Remaining+1):
		return fmt.Errorf("remaining %d: model allows %v, one more %v", d.Remaining, m.allows(t, d.Remaining), m.allows(t, d.Remaining+1))
	case d.ResetAfter < 0 || !m.fresh(t+d.ResetAfter) || (d.ResetAfter > 0 && m.fresh(t+d.ResetAfter-1)):
		return fmt.Errorf("reset_after %d: model fresh then %v, 1 ns earlier %v", d.ResetAfter, m.fresh(t+d.ResetAfter), m.fresh(t+d.ResetAfter-1))
	case d.Delay != delay:
		return fmt.Errorf("delay %d, model %d", d.Delay, delay)
	}
	return nil
}

// delay returns the model's queue wait at t for leaky_bucket, else 0.
func (m *model) delay(t int64) int64 {
	if m.alg != LeakyBucket {
		return 0
	}
	b := m.backlog(t) // ns·Limit
	return (b + m.limit - 1) / m.limit
}

// subject holds the per-key state of the implementation under test.
type subject struct {
	s State
	l Log
}

func newSubject(r *Rule) *subject {
	x := &subject{}
	if r.Algorithm.UsesLog() {
		x.l.Times = make([]int64, r.LogSize())
	}
	return x
}

func (x *subject) decide(now int64, r *Rule, hits int64, load float64) Decision {
	if r.Algorithm.UsesLog() {
		return DecideLog(&x.l, now, r, hits, load)
	}
	return DecideLoad(&x.s, now, r, hits, load)
}

func (x *subject) refund(now int64, r *Rule, hits int64, load float64) Decision {
	if r.Algorithm.UsesLog() {
		return RefundLog(&x.l, now, r, hits, load)
	}
	return Refund(&x.s, now, r, hits, load)
}

// probe decides on a copy, leaving x as it was.
func (x *subject) probe(now int64, r *Rule, hits int64, load float64) Decision {
	c := subject{s: x.s, l: x.l}
	c.l.Times = append([]int64(nil), x.l.Times...)
	return c.decide(now, r, hits, load)
}

// randomRule returns a valid rule small enough for the model's int64
// arithmetic, with a period that rarely divides evenly by the limit.
func randomRule(rng *rand.Rand, alg Algorithm) Rule {
	r := Rule{
		Algorithm: alg,
		Limit:     1 + rng.Int64N(12),
		Period:    int64(time.Millisecond) + rng.Int64N(int64(2*time.Second)),
	}
	if alg.UsesBurst() && rng.IntN(2) == 0 {
		r.Burst = 1 + rng.Int64N(20)
	}
	if alg == LeakyBucket {
		span := r.Capacity() * r.Period / r.Limit
		switch rng.IntN(5) {
		case 0: // the default: the whole queue's drain time
		case 4: // queue nothing
			r.MaxDelay = 1
		case 1:
			r.MaxDelay = rng.Int64N(span + 1)
		case 2:
			r.MaxDelay = r.Period / r.Limit * rng.Int64N(r.Capacity())
		default:
			r.MaxDelay = int64(MaxPeriod)
		}
	}
	return r
}

// step picks the next arrival: the time since the last one and the hits.
// Boundaries get their share: the same instant, exactly the last
// RetryAfter, exactly the next window start. A busy caller never pauses
// for long, so the key stays under pressure and its history grows.
func step(rng *rand.Rand, r *Rule, now, lastHits, lastRetry int64, busy bool) (dt, hits int64) {
	most := r.Limit
	if r.Algorithm.UsesBurst() {
		most = r.Capacity()
	}
	switch rng.IntN(10) {
	case 0:
		hits = 0
	case 1, 2, 3, 4:
		hits = 1
	case 5, 6, 7:
		hits = 1 + rng.Int64N(most)
	case 8:
		hits = most + rng.Int64N(2)
	default:
		hits = lastHits
	}
	t := r.Period / r.Limit
	n := 20
	if busy {
		n = 15
	}
	switch rng.IntN(n) {
	case 0, 1, 2, 3:
		dt = 0
	case 4, 5, 6, 7, 8:
		dt = 1 + rng.Int64N(2*t+1)
	case 9, 10, 11:
		dt = rng.Int64N(r.Period)
	case 12, 13, 14:
		if lastRetry > 0 && lastRetry != Never {
			return lastRetry, lastHits
		}
		dt = rng.Int64N(t + 1)
	case 15, 16:
		dt = r.Period - now%r.Period - rng.Int64N(2) // the next window start, or 1 ns before
	case 17, 18:
		dt = rng.Int64N(3 * r.Period)
	default:
		dt = r.Period * (2 + rng.Int64N(10))
	}
	return max(dt, 0), hits
}

// propertyRuns is how many random arrival sequences each property test
// drives, and steps how long each is.
func propertyRuns() (runs, steps int) {
	if testing.Short() {
		return 300, 100
	}
	return 2000, 200
}

// testAgainstModel drives random arrival sequences through the algorithm
// and the model and requires the same decisions, to the nanosecond.
func testAgainstModel(t *testing.T, alg Algorithm, seed uint64) {
	t.Parallel()
	runs, steps := propertyRuns()
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		r := randomRule(rng, alg)
		if err := r.Validate(); err != nil {
			t.Fatalf("seed %d run %d: random rule %+v: %v", seed, run, r, err)
		}
		m, x := newModel(&r), newSubject(&r)
		var all []event // every allowed request, for the window check
		now := int64(1_700_000_000_000_000_000) + rng.Int64N(int64(time.Hour))
		var hits, retry int64 = 1, 0
		busy := rng.IntN(2) == 0
		for i := range steps {
			var dt int64
			dt, hits = step(rng, &r, now, hits, retry, busy)
			now += dt
			m.forget(now)
			allowed, delay := m.allows(now, hits), m.delay(now)
			d := x.decide(now, &r, hits, 1)
			if allowed && hits > 0 {
				m.allowed = append(m.allowed, event{now, hits})
				all = append(all, event{now, hits})
			}
			if err := m.check(d, now, hits, allowed, delay); err != nil {
				t.Fatalf("seed %d run %d step %d: rule %+v, %d hits at +%v: %v",
					seed, run, i, r, hits, time.Duration(now%int64(time.Hour)), err)
			}
			retry = d.RetryAfter
		}
		if alg == SlidingLog {
			checkWindows(t, &r, all, seed, run)
		}
	}
}

// checkWindows requires at most Limit hits in every window of one Period.
// The count in a window can only peak at an allowed request, so it is
// enough to check the windows ending at each one.
func checkWindows(t *testing.T, r *Rule, all []event, seed uint64, run int) {
	t.Helper()
	from, n := 0, int64(0)
	for _, e := range all {
		n += e.hits
		for all[from].at <= e.at-r.Period {
			n -= all[from].hits
			from++
		}
		if n > r.Limit {
			t.Fatalf("seed %d run %d: %d hits in the period up to %d, limit %d", seed, run, n, e.at, r.Limit)
		}
	}
}

func TestTokenBucketModel(t *testing.T)   { testAgainstModel(t, TokenBucket, 1) }
func TestGCRAModel(t *testing.T)          { testAgainstModel(t, GCRA, 2) }
func TestLeakyBucketModel(t *testing.T)   { testAgainstModel(t, LeakyBucket, 3) }
func TestFixedWindowModel(t *testing.T)   { testAgainstModel(t, FixedWindow, 4) }
func TestSlidingWindowModel(t *testing.T) { testAgainstModel(t, SlidingWindow, 5) }
func TestSlidingLogModel(t *testing.T)    { testAgainstModel(t, SlidingLog, 6) }
