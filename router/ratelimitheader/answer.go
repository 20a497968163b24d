package ratelimitheader

import (
	"net/http"
	"strconv"
	"time"
)

// Answer is one rule's answer to a check, as the public API's Decision
// (or each of its quotas) gives it: what Advertised chooses from.
type Answer struct {
	Rule       string
	Limit      int64
	Window     time.Duration
	Allowed    bool
	Remaining  int64
	RetryAfter time.Duration
	NextAfter  time.Duration
	// FailurePolicy: no counter was read; the rule's failure policy
	// answered.
	FailurePolicy bool
	// Shadow: the rule never limits.
	Shadow bool
}

// Advertised returns the quota policies that RateLimit fields may
// describe among as, in order: those decided by a counter. Not an answer
// without a rule or a limit, not one made by failure policy (no counter
// was read, so there is nothing true to say), not a shadow rule's (which
// never limits, so advertising it would mislead clients).
func Advertised(as []Answer) []Quota {
	var qs []Quota
	for _, a := range as {
		if a.Limit <= 0 || a.Rule == "" || a.FailurePolicy || a.Shadow {
			continue
		}
		qs = append(qs, Quota{
			Name: a.Rule, Quota: a.Limit, Window: a.Window, Remaining: a.Remaining,
			Reset: Reset(a.Allowed, a.RetryAfter, a.NextAfter),
		})
	}
	return qs
}

// SetFields sets RateLimit-Policy and RateLimit on h for qs (Fields); it
// sets nothing when qs is empty.
func SetFields(h http.Header, qs []Quota) {
	if len(qs) == 0 {
		return
	}
	policy, limit := Fields(qs)
	h.Set(PolicyField, policy)
	h.Set(LimitField, limit)
}

// RetryAfterField is the name of the field that says when to retry
// (RFC 9110).
const RetryAfterField = "Retry-After"

// RetryAfter is the Retry-After value of a denial whose wait is d: whole
// seconds, rounded up, at least 1 so that no client is told to retry at
// once; false for a denial that no wait lifts (d past Never: the request
// costs more than its rule ever allows), which advertises no time.
func RetryAfter(d time.Duration) (string, bool) {
	if d > Never {
		return "", false
	}
	return strconv.FormatInt(max(Seconds(d), 1), 10), true
}
