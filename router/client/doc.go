// Package client is the Go client of shardlimit's public RateLimiter API,
// the package a service links in to ask "may user U call endpoint E now?".
//
// A Client dials one or more routers over TLS (Options.TLS; a client
// certificate in it identifies the service) with the service's bearer
// token if it has one (Options.Token; TokenFile follows a rotated file),
// or, given neither, with what the client config file of
// $SHARDLIMIT_CONFIG names; plain text only with Options.Insecure. It
// spreads calls over the routers round
// robin, and bounds every call by Options.Timeout. When no router answers in
// time it answers by its own failure mode (open by default, as the routers'
// rules do), marking the Decision FromFailureMode, so a rate limiter outage
// never becomes an outage of the service. Concurrent Check calls may be
// coalesced into one RPC (Options.BatchWindow).
//
// Retries: a check consumes quota, so a call is retried only when the
// request surely never reached a router: the RPC failed with UNAVAILABLE and
// gRPC never opened a stream for it on any connection (the failure happened
// while picking or connecting, e.g. connection refused or a TLS handshake
// failure). Anything that may have reached a router's handler — a deadline,
// a connection lost after the request was sent, any other status — is never
// retried. Retries go to the next router, after an exponential backoff with
// full jitter, and only while the call's deadline leaves time for them.
//
// Callers: services directly, and the net/http middleware in httpmw. The
// client never decides a check from a counter of its own, never retries a
// request that may have been counted, never blocks past its deadline, and
// never logs users, API keys or tokens.
package client
