package httpmw

import (
	"net/http"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

// advertised returns the quota policies of d that RateLimit fields may
// describe (ratelimitheader.Advertised: those decided by a counter), none
// when the client's failure mode decided.
func advertised(d client.Decision) []ratelimitheader.Quota {
	if d.FromFailureMode {
		return nil
	}
	ps := d.Policies()
	as := make([]ratelimitheader.Answer, len(ps))
	for i, q := range ps {
		as[i] = ratelimitheader.Answer{
			Rule: q.Rule, Limit: q.Limit, Window: q.Window, Allowed: q.Allowed, Remaining: q.Remaining,
			RetryAfter: q.RetryAfter, NextAfter: q.NextAfter, FailurePolicy: q.FailurePolicy, Shadow: q.Shadow,
		}
	}
	return ratelimitheader.Advertised(as)
}

// setRateLimitFields sets the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 for d, one quota policy per rule
// that applied, named after the rule, complete without configuration:
//
//	RateLimit-Policy: "checkout";q=10;w=60
//	RateLimit: "checkout";r=0;t=6
//
// q is the rule's limit and w its period in seconds. r is the remaining
// quota (never negative) and t, in whole seconds rounded up, the wait
// until more quota is available (ratelimitheader.Reset): when the rule
// denied, its RetryAfter (when the same request may pass); when it
// allowed, its NextAfter (when remaining grows), not the time until the
// quota is whole. It sets nothing when no counter decided.
func setRateLimitFields(h http.Header, d client.Decision) {
	ratelimitheader.SetFields(h, advertised(d))
}

// retryAfter is the Retry-After value of a denied decision
// (ratelimitheader.RetryAfter): whole seconds, rounded up, at least 1;
// "never" for a denial that no wait lifts.
func retryAfter(d client.Decision) string {
	if s, ok := ratelimitheader.RetryAfter(d.RetryAfter); ok {
		return s
	}
	return "never"
}

// ProblemDenied is the default Options.Denied: 429 Too Many Requests with
// the draft's quota-exceeded problem details (application/problem+json),
// naming the rules that denied in violated-policies:
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	 "title":"Request cannot be satisfied as assigned quota has been exceeded",
//	 "status":429,"detail":"rate limit exceeded: retry in 6 s",
//	 "violated-policies":["checkout"]}
//
// A denial that no wait lifts (the request costs more than the rule ever
// allows) says so in detail, and has no Retry-After.
func ProblemDenied(w http.ResponseWriter, _ *http.Request, d client.Decision) {
	detail := "rate limit exceeded: retry in " + retryAfter(d) + " s"
	switch {
	case d.NeverAllowed:
		detail = "rate limit exceeded: this request costs more than the limit allows"
	case d.FromFailureMode || d.FailurePolicy:
		detail = "rate limiter unavailable, failing closed: retry in " + retryAfter(d) + " s"
	}
	ratelimitheader.QuotaExceeded(http.StatusTooManyRequests, detail, violated(d)).Write(w)
}

// violated names the rules whose counters denied d.
func violated(d client.Decision) []string {
	var names []string
	for _, q := range d.Policies() {
		if !q.Allowed && !q.FailurePolicy {
			names = append(names, q.Rule)
		}
	}
	return names
}
