package httpmw

import (
	"net/http"
	"strconv"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

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
	h.Set(ratelimitheader.PolicyField, ratelimitheader.Policy(d.Rule, d.Limit, ceilSeconds(window)))
	reset := d.ResetAfter
	if !d.Allowed {
		reset = d.RetryAfter
	}
	h.Set(ratelimitheader.LimitField, ratelimitheader.Limit(d.Rule, d.Remaining, ceilSeconds(reset)))
}

// retryAfter is the Retry-After value of a denied decision: whole seconds,
// rounded up, at least 1 so that no client is told to retry at once.
func retryAfter(d client.Decision) string {
	return strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10)
}

// never reports a denial that no wait can lift (hits over the rule's
// capacity): its retry_after is the limiter's "never", ~292 years.
func never(d client.Decision) bool { return d.RetryAfter > 100*365*24*time.Hour }

// ceilSeconds rounds d up to whole seconds, clamped to 0..ratelimitheader.MaxInteger.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return min(s, ratelimitheader.MaxInteger)
}
