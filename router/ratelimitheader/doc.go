// Package ratelimitheader formats the fields of
// draft-ietf-httpapi-ratelimit-headers-10 — RateLimit-Policy and RateLimit —
// as RFC 9651 structured-field list items. The HTTP middleware and the Envoy
// rate limit service both answer with them; this is the one place that
// knows the syntax. It does no I/O.
package ratelimitheader
