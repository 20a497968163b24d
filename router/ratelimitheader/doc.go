// Package ratelimitheader formats the fields of
// draft-ietf-httpapi-ratelimit-headers-10 — RateLimit-Policy and RateLimit —
// as RFC 9651 structured-field list items, one item per quota policy (a
// rule), and the draft's quota-exceeded problem details (RFC 9457). It
// holds the fields' meaning too: Reset says which wait is t, Advertised
// which rules' answers the fields may describe, RetryAfter what a
// denial's Retry-After says. The HTTP middleware, the router's HTTP/JSON
// API and the Envoy rate limit service all answer with them; this is the
// one place that knows the syntax. Problem is RFC 9457 problem details,
// which the HTTP/JSON API's errors use too. It does no I/O beyond writing a
// response it is handed, and never decides anything: the figures come from
// the shards' decisions.
package ratelimitheader
