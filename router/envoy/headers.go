package envoy

import (
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

// Header names of draft-ietf-httpapi-ratelimit-headers-10, and
// Retry-After (RFC 9110).
const (
	HeaderPolicy     = ratelimitheader.PolicyField
	HeaderRateLimit  = ratelimitheader.LimitField
	HeaderRetryAfter = "Retry-After"
)

// never is the retry_after at and past which a denial is taken to be
// permanent (hits over a rule's capacity), so no Retry-After is promised.
const never = 366 * 24 * time.Hour

// limitState is what the headers say about one descriptor decided by a
// counter.
type limitState struct {
	name       string        // the rule's name: the policy's name
	limit      int64         // hits per period
	period     time.Duration // the rule's period
	remaining  int64
	nextAfter  time.Duration // until remaining grows (Decision.next_after)
	overLimit  bool
	retryAfter time.Duration // when overLimit
	byPolicy   bool          // decided by failure policy: no counter state
	shadow     bool          // shadow rule: nothing is enforced
}

// headers returns the response headers of
// draft-ietf-httpapi-ratelimit-headers-10 for the descriptors decided in
// one answer, nil when there is nothing to say:
//
//	RateLimit-Policy: "checkout";q=10;w=60
//	RateLimit: "checkout";r=0;t=6
//	Retry-After: 6
//
// Both RateLimit fields are Structured Field Lists with one Item per rule
// (the policy's name is the rule's name, a String), in the order the
// rules first appear among the descriptors. RateLimit-Policy has q, the
// limit, and w, the period in seconds, as CurrentLimit expresses them (so
// a 500ms period with limit 10 is q=20;w=1). RateLimit has r, the hits
// remaining, and t, the seconds until more quota is available, as
// ratelimitheader.Reset defines it: until remaining grows (next_after
// rounded up), not until the counter is whole — or, when the descriptor
// is over limit and can be allowed later, the seconds until the same
// request is allowed (retry_after rounded up), so that Retry-After never
// points earlier than t (section 6 of the draft).
// When a rule decides several descriptors, its RateLimit item is the most
// restrictive one: over limit first, then the least remaining.
//
// Retry-After, in seconds rounded up and at least 1, is the longest
// retry_after among the descriptors over limit, those denied by failure
// policy included; it is left out when every denial is permanent (the
// hits can never be allowed).
//
// Descriptors of shadow rules are left out (a client must not slow down
// for a limit that is not enforced), and so are descriptors decided by
// failure policy but for their Retry-After: no counter was read, so there
// is nothing true to say about remaining or reset.
func headers(states []limitState) []*corev3.HeaderValue {
	var policy, limits []string
	index := map[string]int{}
	var worst []limitState
	var retry time.Duration
	retrySet := false
	for _, s := range states {
		if s.overLimit && s.retryAfter < never {
			retry, retrySet = max(retry, s.retryAfter), true
		}
		if s.shadow || s.byPolicy {
			continue
		}
		i, ok := index[s.name]
		if !ok {
			index[s.name] = len(worst)
			worst = append(worst, s)
			q, w := window(s.limit, s.period)
			policy = append(policy, ratelimitheader.Policy(s.name, q, w))
			continue
		}
		if w := worst[i]; (s.overLimit && !w.overLimit) || (s.overLimit == w.overLimit && s.remaining < w.remaining) {
			worst[i] = s
		}
	}
	for _, s := range worst {
		t := seconds(s.nextAfter)
		if s.overLimit && s.retryAfter < never {
			t = seconds(s.retryAfter)
		}
		limits = append(limits, ratelimitheader.Limit(s.name, s.remaining, t))
	}
	var hs []*corev3.HeaderValue
	if len(policy) > 0 {
		hs = append(hs,
			&corev3.HeaderValue{Key: HeaderPolicy, Value: strings.Join(policy, ", ")},
			&corev3.HeaderValue{Key: HeaderRateLimit, Value: strings.Join(limits, ", ")})
	}
	if retrySet {
		hs = append(hs, &corev3.HeaderValue{Key: HeaderRetryAfter, Value: strconv.FormatInt(max(seconds(retry), 1), 10)})
	}
	return hs
}

// seconds rounds d up to whole seconds, 0 for d <= 0, capped at a year.
func seconds(d time.Duration) int64 { return ratelimitheader.Seconds(min(d, never)) }
