package envoy

import (
	"math"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

func TestCurrentLimit(t *testing.T) {
	const (
		sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
		min  = rlsv3.RateLimitResponse_RateLimit_MINUTE
		hour = rlsv3.RateLimitResponse_RateLimit_HOUR
		day  = rlsv3.RateLimitResponse_RateLimit_DAY
	)
	for _, tc := range []struct {
		limit   int64
		period  time.Duration
		perUnit uint32
		unit    rlsv3.RateLimitResponse_RateLimit_Unit
		mult    uint32 // 0: unset
		q, w    int64
	}{
		{10, time.Second, 10, sec, 0, 10, 1},
		{10, time.Minute, 10, min, 0, 10, 60},
		{10, 2 * time.Minute, 10, min, 2, 10, 120},
		{10, 90 * time.Second, 10, sec, 90, 10, 90},
		{5, time.Hour, 5, hour, 0, 5, 3600},
		{5, 36 * time.Hour, 5, hour, 36, 5, 129600},
		{7, 24 * time.Hour, 7, day, 0, 7, 86400},
		{7, 366 * 24 * time.Hour, 7, day, 366, 7, 366 * 86400},
		{10, 500 * time.Millisecond, 20, sec, 0, 20, 1},
		{10, 1500 * time.Millisecond, 7, sec, 0, 7, 1},
		{1, time.Hour + time.Millisecond, 1, sec, 0, 1, 1},
		{1_000_000_000, time.Millisecond, math.MaxUint32, sec, 0, math.MaxUint32, 1},
	} {
		l := CurrentLimit("r", tc.limit, tc.period)
		if l.Name != "r" || l.RequestsPerUnit != tc.perUnit || l.Unit != tc.unit || l.GetUnitMultiplier().GetValue() != tc.mult {
			t.Errorf("%d per %v: %v, want %d per %v ×%d", tc.limit, tc.period, l, tc.perUnit, tc.unit, tc.mult)
		}
		if q, w := window(tc.limit, tc.period); q != tc.q || w != tc.w {
			t.Errorf("%d per %v: q=%d w=%d, want q=%d w=%d", tc.limit, tc.period, q, w, tc.q, tc.w)
		}
	}
}
