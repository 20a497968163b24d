package limiter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := Rule{Algorithm: TokenBucket, Limit: 10, Period: sec}
	for _, c := range []struct {
		name  string
		edit  func(*Rule)
		field string // "" when valid
		err   error
	}{
		{"valid", func(r *Rule) {}, "", nil},
		{"no algorithm", func(r *Rule) { r.Algorithm = Unspecified }, "algorithm:", ErrUnknownAlgorithm},
		{"unknown algorithm", func(r *Rule) { r.Algorithm = 42 }, "algorithm:", ErrUnknownAlgorithm},
		{"zero limit", func(r *Rule) { r.Limit = 0 }, "limit:", ErrOutOfRange},
		{"huge limit", func(r *Rule) { r.Limit = MaxLimit + 1 }, "limit:", ErrOutOfRange},
		{"short period", func(r *Rule) { r.Period = int64(MinPeriod) - 1 }, "period:", ErrOutOfRange},
		{"long period", func(r *Rule) { r.Period = int64(MaxPeriod) + 1 }, "period:", ErrOutOfRange},
		{"negative burst", func(r *Rule) { r.Burst = -1 }, "burst:", ErrOutOfRange},
		{"huge burst", func(r *Rule) { r.Burst = MaxBurst + 1 }, "burst:", ErrOutOfRange},
		{"burst refills too slowly", func(r *Rule) { r.Limit, r.Period, r.Burst = 1, int64(MaxPeriod), 10 }, "burst:", ErrOutOfRange},
		{"window ignores burst", func(r *Rule) { r.Algorithm, r.Limit, r.Period, r.Burst = FixedWindow, 1, int64(MaxPeriod), 10 }, "", nil},
		{"negative max_delay", func(r *Rule) { r.Algorithm, r.MaxDelay = LeakyBucket, -1 }, "max_delay:", ErrOutOfRange},
		{"huge max_delay", func(r *Rule) { r.Algorithm, r.MaxDelay = LeakyBucket, int64(MaxPeriod)+1 }, "max_delay:", ErrOutOfRange},
		{"max_delay off leaky_bucket", func(r *Rule) { r.MaxDelay = sec }, "max_delay:", ErrNotApplicable},
		{"max_delay on leaky_bucket", func(r *Rule) { r.Algorithm, r.MaxDelay = LeakyBucket, sec }, "", nil},
		{"negative soft", func(r *Rule) { r.SoftPercent = -1 }, "soft_percent:", ErrOutOfRange},
		{"huge soft", func(r *Rule) { r.SoftPercent = MaxSoftPercent + 1 }, "soft_percent:", ErrOutOfRange},
		{"negative elastic", func(r *Rule) { r.ElasticPercent = -1 }, "elastic_percent:", ErrOutOfRange},
		{"huge elastic", func(r *Rule) { r.ElasticPercent, r.ElasticLoadPercent = MaxElasticPercent+1, 50 }, "elastic_percent:", ErrOutOfRange},
		{"elastic without threshold", func(r *Rule) { r.ElasticPercent = 50 }, "elastic_load_percent:", ErrOutOfRange},
		{"threshold over 100", func(r *Rule) { r.ElasticPercent, r.ElasticLoadPercent = 50, 101 }, "elastic_load_percent:", ErrOutOfRange},
		{"threshold without elastic", func(r *Rule) { r.ElasticLoadPercent = 50 }, "elastic_load_percent:", ErrOutOfRange},
		{"growth past 32 bits", func(r *Rule) { r.Limit, r.ElasticPercent, r.ElasticLoadPercent = MaxLimit, MaxElasticPercent, 50 }, "elastic_percent:", ErrOutOfRange},
		{"soft past 32 bits", func(r *Rule) {
			r.Limit, r.SoftPercent, r.ElasticPercent, r.ElasticLoadPercent = MaxLimit, MaxSoftPercent, 200, 50
		}, "elastic_percent:", ErrOutOfRange},
		{"soft at the top", func(r *Rule) { r.Limit, r.SoftPercent = MaxLimit, MaxSoftPercent }, "", nil},
		{"log too big", func(r *Rule) { r.Algorithm, r.Limit = SlidingLog, MaxLogSize+1 }, "limit:", ErrOutOfRange},
		{"log too big with soft", func(r *Rule) { r.Algorithm, r.Limit, r.SoftPercent = SlidingLog, MaxLogSize, 1 }, "limit:", ErrOutOfRange},
		{"log at the top", func(r *Rule) { r.Algorithm, r.Limit = SlidingLog, MaxLogSize }, "", nil},
	} {
		r := ok
		c.edit(&r)
		err := r.Validate()
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %+v: %v", c.name, r, err)
		case c.field != "" && (err == nil || !strings.HasPrefix(err.Error(), c.field) || !errors.Is(err, c.err)):
			t.Errorf("%s: %+v: got %v, want %q… wrapping %v", c.name, r, err, c.field, c.err)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range algorithms {
		if got, err := ParseAlgorithm(a.String()); got != a || err != nil {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a, got, err)
		}
	}
	if _, err := ParseAlgorithm("unspecified"); !errors.Is(err, ErrUnknownAlgorithm) {
		t.Errorf("unspecified: %v", err)
	}
}

func TestMisuse(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	var s State
	mustPanic("Decide on sliding_log", func() { Decide(&s, t0, &Rule{Algorithm: SlidingLog, Limit: 1, Period: sec}, 1) })
	mustPanic("Decide on no algorithm", func() { Decide(&s, t0, &Rule{Limit: 1, Period: sec}, 1) })
	mustPanic("DecideLog on fixed_window", func() { DecideLog(&Log{}, t0, &Rule{Algorithm: FixedWindow, Limit: 1, Period: sec}, 1, 1) })
}

func TestNegativeHits(t *testing.T) {
	// Callers reject negative hits; should one slip through, it is denied
	// for good and changes nothing.
	for _, alg := range algorithms {
		r := Rule{Algorithm: alg, Limit: 3, Period: sec}
		x := newSubject(&r)
		x.decide(t0, &r, 2, 1)
		before := *x
		before.l.Times = append([]int64(nil), x.l.Times...)
		read := x.probe(t0, &r, 0, 1)
		d := x.decide(t0, &r, -5, 1)
		if d.Allowed || d.RetryAfter != Never || d.Remaining != read.Remaining {
			t.Errorf("%v: %+v", alg, d)
		}
		if x.s != before.s || x.l.Len != before.l.Len {
			t.Errorf("%v: state changed from %+v to %+v", alg, before, *x)
		}
	}
}

// A leaky_bucket rule's default max_delay goes to shards as the queue's
// drain time, which decides exactly as 0 does on a shard of this version.
func TestWireMaxDelay(t *testing.T) {
	for _, c := range []struct {
		r    Rule
		want int64
	}{
		{Rule{Algorithm: LeakyBucket, Limit: 10, Period: 2 * sec}, 2 * sec},
		{Rule{Algorithm: LeakyBucket, Limit: 3, Period: sec, Burst: 1}, sec/3 + 1},
		{Rule{Algorithm: LeakyBucket, Limit: 10, Period: 2 * sec, MaxDelay: sec / 2}, sec / 2},
		{Rule{Algorithm: LeakyBucket, Limit: 1, Period: int64(MaxPeriod), Burst: 2}, 0}, // past MaxPeriod: 0, the shard's default
		{Rule{Algorithm: LeakyBucket, Limit: 1, Period: int64(MaxPeriod), Burst: 1 << 62}, 0},
		{Rule{Algorithm: TokenBucket, Limit: 10, Period: 2 * sec}, 0},
	} {
		if got := c.r.WireMaxDelay(); got != c.want {
			t.Errorf("%+v: %d, want %d", c.r, got, c.want)
		}
	}
	// The same decisions with the explicit value as with 0.
	r := Rule{Algorithm: LeakyBucket, Limit: 10, Period: 2 * sec}
	explicit := r
	explicit.MaxDelay = r.WireMaxDelay()
	var a, b State
	for i := range 40 {
		now := int64(i) * sec / 20
		da, db := Decide(&a, now, &r, 1), Decide(&b, now, &explicit, 1)
		if da != db {
			t.Fatalf("hit %d at %v: %+v with max_delay 0, %+v with %v", i, time.Duration(now), da, db, time.Duration(explicit.MaxDelay))
		}
	}
}
