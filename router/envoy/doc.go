// Package envoy serves Envoy's rate limit service v3
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) on top of
// a Decider, which the router is: Envoy's and Istio's global rate limit
// filters call it with a domain and a list of descriptors, and get one
// status per descriptor.
//
// A domain is a shardlimit service. Each descriptor is matched against the
// service's descriptor rules (rules.Set.Descriptors) by Match: the most
// specific matching rule decides it, and the values at the rule's wildcard
// positions (no value, or a prefix like "foo*") name its counter. Then, as
// envoy ratelimit does, a rule that another matched rule replaces
// (rules.Rule.Replaces) is not applied, unlimited rules answer OK and
// deny_all rules OVER_LIMIT without counting, and a descriptor's own limit
// (RateLimitDescriptor.limit) replaces its rule's only where the rule has
// allow_request_override. The package turns the rest into checks
// bound to their rules (rules.Resolved), has the Decider decide them all in
// one call, and turns the decisions into Envoy's statuses: code,
// current_limit (see CurrentLimit for how a period becomes Envoy's unit),
// limit_remaining and duration_until_reset, plus, when Options.Headers is
// set, the RateLimit-Policy, RateLimit and Retry-After response headers of
// draft-ietf-httpapi-ratelimit-headers-10. A descriptor the Decider
// answered by failure policy has its code but no limit, and the response's
// dynamic_metadata marks it under the key "shardlimit" (policy.go: the
// keys, and FailurePolicyOf, which reads them back), so that Envoy's access
// log and the bench can tell it from a descriptor no rule matches.
//
// Unknown domains and descriptors that match no rule are answered OK
// without a limit, as Envoy expects of a rate limit service. Malformed
// requests are rejected whole with INVALID_ARGUMENT naming the field and
// the bound, before anything is counted.
//
// Register is called by whoever owns the gRPC server (the router, or a
// test). The package is glue like the router: it must never decide a
// descriptor itself (counting and failure policies belong to the Decider),
// never invent a limit for a descriptor no rule matches, and never echo a
// descriptor's values in errors or logs, since they may be addresses,
// user ids or credentials.
package envoy
