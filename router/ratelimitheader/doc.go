// Package ratelimitheader formats the fields of
// draft-ietf-httpapi-ratelimit-headers-10 — RateLimit-Policy and RateLimit —
// as RFC 9651 structured-field list items, one item per quota policy (a
// rule), and the draft's quota-exceeded problem details (RFC 9457). It
// holds the fields' meaning too: Reset says which wait is t. The HTTP
// middleware and the Envoy rate limit service both answer with them; this
// is the one place that knows the syntax. It does no I/O beyond writing a
// response it is handed, and never decides anything: the figures come from
// the shards' decisions.
package ratelimitheader
