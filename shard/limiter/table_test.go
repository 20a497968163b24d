package limiter

import (
	"testing"
	"time"
)

// t0 is the explicit start time of the table tests: a whole second since
// the Unix epoch, so it starts a window of any whole-second period.
const t0 = int64(1_700_000_000_000_000_000)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
)

// row is one check of a table test, or with refund set one refund, and
// the decision it must get.
type row struct {
	at, hits  int64
	refund    bool
	allowed   bool
	remaining int64
	retry     int64
	reset     int64
	delay     int64
}

// runTable drives one key through rows, in order, at load 1.
func runTable(t *testing.T, r Rule, rows []row) {
	t.Helper()
	if err := r.Validate(); err != nil {
		t.Fatalf("rule %+v: %v", r, err)
	}
	x := newSubject(&r)
	for i, w := range rows {
		var d Decision
		if w.refund {
			d = x.refund(w.at, &r, w.hits, 1)
		} else {
			d = x.decide(w.at, &r, w.hits, 1)
		}
		if d.Allowed != w.allowed || d.Remaining != w.remaining || d.RetryAfter != w.retry || d.ResetAfter != w.reset || d.Delay != w.delay {
			t.Fatalf("row %d (t0+%v, hits %d, refund %v):\n got allowed=%v remaining=%d retry=%d reset=%d delay=%d\nwant allowed=%v remaining=%d retry=%d reset=%d delay=%d",
				i, time.Duration(w.at-t0), w.hits, w.refund,
				d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay,
				w.allowed, w.remaining, w.retry, w.reset, w.delay)
		}
	}
}
