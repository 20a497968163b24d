package ratelimitheader

import (
	"strconv"
	"strings"
	"time"
)

// Field names.
const (
	PolicyField = "RateLimit-Policy"
	LimitField  = "RateLimit"
)

// MaxInteger is the largest RFC 9651 Integer; larger values are clamped.
const MaxInteger = 999_999_999_999_999

// Quota is one quota policy and the state of its counter: one item of
// each field.
type Quota struct {
	// Name is the policy's name: the rule's.
	Name string
	// Quota is q, the quota units (hits) per window.
	Quota int64
	// Window is w, rounded up to whole seconds; 0 leaves w out.
	Window time.Duration
	// Remaining is r, the quota units left now (never negative).
	Remaining int64
	// Reset is t, the wait until more quota is available, rounded up to
	// whole seconds: see Reset.
	Reset time.Duration
}

// Fields returns the values of RateLimit-Policy and RateLimit for qs, one
// list item each, in the order given:
//
//	RateLimit-Policy: "burst";q=10;w=1, "daily";q=1000;w=86400
//	RateLimit: "burst";r=0;t=1, "daily";r=875;t=3600
//
// Both are empty when qs is.
func Fields(qs []Quota) (policy, limit string) {
	ps, ls := make([]string, len(qs)), make([]string, len(qs))
	for i, q := range qs {
		ps[i] = Policy(q.Name, q.Quota, Seconds(q.Window))
		ls[i] = Limit(q.Name, q.Remaining, Seconds(q.Reset))
	}
	return strings.Join(ps, ", "), strings.Join(ls, ", ")
}

// Reset is a policy's t, the time until more quota is available: when the
// check was denied, the wait after which the same request is allowed (retryAfter, what
// Retry-After says, so t never points earlier than Retry-After); when it
// was allowed, the wait until the remaining quota grows (nextAfter), not
// until the quota is whole. A client told r=0;t=60 that waits 60 seconds
// is allowed, and is never answered a 429 with t=6 in between.
func Reset(allowed bool, retryAfter, nextAfter time.Duration) time.Duration {
	if !allowed {
		return retryAfter
	}
	return nextAfter
}

// Policy returns one RateLimit-Policy item: "name";q=quota;w=window, with w
// left out when window is 0 (seconds).
func Policy(name string, quota, window int64) string {
	s := String(name) + ";q=" + strconv.FormatInt(clamp(quota), 10)
	if window > 0 {
		s += ";w=" + strconv.FormatInt(clamp(window), 10)
	}
	return s
}

// Limit returns one RateLimit item: "name";r=remaining;t=seconds.
func Limit(name string, remaining, seconds int64) string {
	return String(name) + ";r=" + strconv.FormatInt(clamp(remaining), 10) + ";t=" + strconv.FormatInt(clamp(seconds), 10)
}

// Never is the wait past which a denial is taken as never lifted: the
// request costs more than its rule ever allows (the shard answers such a
// denial with the longest wait it can express). Headers leave out a time
// for it rather than advertise centuries.
const Never = 100 * 365 * 24 * time.Hour

// Seconds rounds d up to whole seconds, clamped to 0..MaxInteger: the unit
// of w, t and Retry-After. Rounding up keeps the promise that waiting t is
// enough.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return min(s, MaxInteger)
}

func clamp(n int64) int64 { return min(max(n, 0), MaxInteger) }

// String renders s as an RFC 9651 String: quoted, with '"' and '\'
// escaped. A String holds printable ASCII only, so any other byte becomes
// '?'.
func String(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
