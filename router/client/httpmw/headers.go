package httpmw

import (
	"net/http"
	"strconv"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

// advertised returns the quota policies of d that RateLimit fields may
// describe: those decided by a counter. Not when no rule applies, not when
// a failure policy or the client's failure mode decided (no counter was
// read, so there is nothing true to say), not for shadow rules (which
// never limit, so advertising them would mislead clients).
func advertised(d client.Decision) []ratelimitheader.Quota {
	if d.FromFailureMode {
		return nil
	}
	var qs []ratelimitheader.Quota
	for _, q := range d.Policies() {
		if q.Limit <= 0 || q.Rule == "" || q.FailurePolicy || q.Shadow {
			continue
		}
		qs = append(qs, ratelimitheader.Quota{
			Name: q.Rule, Quota: q.Limit, Window: q.Window, Remaining: q.Remaining,
			Reset: ratelimitheader.Reset(q.Allowed, q.RetryAfter, q.NextAfter),
		})
	}
	return qs
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
	qs := advertised(d)
	if len(qs) == 0 {
		return
	}
	policy, limit := ratelimitheader.Fields(qs)
	h.Set(ratelimitheader.PolicyField, policy)
	h.Set(ratelimitheader.LimitField, limit)
}

// retryAfter is the Retry-After value of a denied decision: whole seconds,
// rounded up, at least 1 so that no client is told to retry at once.
func retryAfter(d client.Decision) string {
	return strconv.FormatInt(max(ratelimitheader.Seconds(d.RetryAfter), 1), 10)
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
