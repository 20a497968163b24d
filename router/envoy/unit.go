package envoy

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// units are Envoy's units of time that a period is expressed in, longest
// first. WEEK, MONTH and YEAR are left out: a month and a year have no
// fixed length, and older Envoys' header generation does not know WEEK.
var units = []struct {
	unit rlsv3.RateLimitResponse_RateLimit_Unit
	d    time.Duration
}{
	{rlsv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
	{rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	{rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	{rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second},
}

// CurrentLimit expresses limit hits per period as Envoy's RateLimit, named
// name.
//
// A period that is a whole number of seconds is exact: the unit is the
// longest of DAY, HOUR, MINUTE and SECOND that divides the period, and
// unit_multiplier the number of such units (left unset when 1), with
// requests_per_unit = limit. So 10 per 2m is 10 per MINUTE with multiplier
// 2, not 5 per MINUTE: the limit and the window stay what the rule says,
// and Envoy's header generation, which multiplies the unit by
// unit_multiplier, advertises exactly the rule's window (an Envoy too old
// to know unit_multiplier shows 10 per minute, stricter than the truth).
//
// A period that is not a whole number of seconds (rules allow 1ms..366d)
// has no exact form, since Envoy's smallest unit is SECOND: it becomes the
// same rate per SECOND, rounded to the nearest integer and at least 1, and
// capped at the largest uint32 (500ms with limit 10 is 20 per SECOND, 1.5s
// with limit 10 is 7 per SECOND).
func CurrentLimit(name string, limit int64, period time.Duration) *rlsv3.RateLimitResponse_RateLimit {
	perUnit, unit, mult := limitUnit(limit, period)
	l := &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: perUnit, Unit: unit}
	if mult > 1 {
		l.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return l
}

// limitUnit returns the parts of CurrentLimit.
func limitUnit(limit int64, period time.Duration) (perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, mult uint32) {
	if period >= time.Second && period%time.Second == 0 {
		for _, u := range units {
			if period%u.d == 0 {
				return clampUint32(float64(limit)), u.unit, uint32(min(period/u.d, math.MaxUint32))
			}
		}
	}
	if period <= 0 {
		return clampUint32(float64(limit)), rlsv3.RateLimitResponse_RateLimit_SECOND, 1
	}
	rate := math.Round(float64(limit) * float64(time.Second) / float64(period))
	return clampUint32(max(rate, 1)), rlsv3.RateLimitResponse_RateLimit_SECOND, 1
}

// window returns the limit and window in seconds that CurrentLimit's form
// stands for: the q and w of a RateLimit-Policy item.
func window(limit int64, period time.Duration) (q int64, w int64) {
	perUnit, unit, mult := limitUnit(limit, period)
	for _, u := range units {
		if u.unit == unit {
			return int64(perUnit), int64(u.d/time.Second) * int64(mult)
		}
	}
	return int64(perUnit), 1
}

func clampUint32(v float64) uint32 {
	switch {
	case v <= 0:
		return 0
	case v >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}
