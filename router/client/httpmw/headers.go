package httpmw

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
)

// maxSFInteger is the largest Integer of RFC 9651 structured fields.
const maxSFInteger = 999_999_999_999_999

// hasCounter reports whether d comes from a counter, so that RateLimit
// fields describe something real: not when no rule applies, not when a
// failure policy or failure mode decided, not for shadow rules (which never
// limit, so advertising them would mislead clients).
func hasCounter(d client.Decision) bool {
	return d.Limit > 0 && d.Rule != "" && !d.FromFailureMode && !d.FailurePolicy && !d.Shadow
}

// setRateLimitFields sets the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 for d, one quota policy named
// after the rule:
//
//	RateLimit-Policy: "checkout";q=10;w=60
//	RateLimit: "checkout";r=0;t=6
//
// q is the limit and w the window in seconds, left out when window is 0. r
// is the remaining quota (never negative) and t, in whole seconds rounded
// up, is RetryAfter when denied (when the same request may pass) and
// ResetAfter when allowed (when the quota is whole again).
func setRateLimitFields(h http.Header, d client.Decision, window time.Duration) {
	name := sfString(d.Rule)
	var p strings.Builder
	p.WriteString(name)
	p.WriteString(";q=")
	p.WriteString(strconv.FormatInt(min(d.Limit, maxSFInteger), 10))
	if window > 0 {
		p.WriteString(";w=")
		p.WriteString(strconv.FormatInt(ceilSeconds(window), 10))
	}
	h.Set("RateLimit-Policy", p.String())

	reset := d.ResetAfter
	if !d.Allowed {
		reset = d.RetryAfter
	}
	h.Set("RateLimit", name+";r="+strconv.FormatInt(min(max(d.Remaining, 0), maxSFInteger), 10)+
		";t="+strconv.FormatInt(ceilSeconds(reset), 10))
}

// retryAfter is the Retry-After value of a denied decision: whole seconds,
// rounded up, at least 1 so that no client is told to retry at once.
func retryAfter(d client.Decision) string {
	return strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10)
}

// never reports a denial that no wait can lift (hits over the rule's
// capacity): its retry_after is the limiter's "never", ~292 years.
func never(d client.Decision) bool { return d.RetryAfter > 100*365*24*time.Hour }

// ceilSeconds rounds d up to whole seconds, clamped to 0..maxSFInteger.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return min(s, maxSFInteger)
}

// sfString renders s as an RFC 9651 String: quoted, with '"' and '\'
// escaped; bytes outside printable ASCII, which a String cannot hold,
// become '?'.
func sfString(s string) string {
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
