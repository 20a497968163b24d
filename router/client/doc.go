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
// coalesced into one RPC (Options.BatchWindow), or sent in batches over
// one CheckStream (Options.Stream: through router/batcher's queue, with
// no wait when idle; see stream.go).
//
// Wait is CheckOne for callers that would rather wait than be denied, like
// rate.Limiter.Wait: it sleeps until the retry time and checks again,
// bounded by its context, and returns at once (ErrWaitPastDeadline) when
// the retry time is past the context's deadline, and ErrNeverAllowed for a
// denial that no wait lifts.
//
// Such a denial (the check's hits are over what its rule ever allows) has
// Decision.NeverAllowed set and RetryAfter RetryNever; a Decision's String
// and LogValue (slog) show it as retry_after=never, not as the longest
// time.Duration, 2562047h47m16s.
//
// Retries: a check consumes quota, so a call is retried freely only when
// the request surely never reached a router: the RPC failed with
// UNAVAILABLE and gRPC never opened a stream for it on any connection (the
// failure happened while picking or connecting, e.g. connection refused or
// a TLS handshake failure). A request whose connection broke after it was
// sent, before the router's answer arrived (UNAVAILABLE with no status
// from the router, whether or not its headers came: the router was
// killed, say), is
// retried once, so that losing a router costs callers nothing. That router
// may have counted it before it died, so the retried check may count
// twice: that errs toward denying (the caller's quota runs out one hit
// early), never toward allowing past a limit. A deadline, and every status
// a router sent (UNAVAILABLE included), are never retried. Retries go to
// the next router, after an exponential backoff with full jitter, and only
// while the call's deadline leaves time for them. Over a stream
// (Options.Stream) the same holds for each message, and one more case is
// sent again as never sent: a message left unanswered when the router
// ended the stream with OK (it stops, or the stream reached its age),
// which the router promises it never decided.
//
// Metrics, when Options.Registerer is set: shardlimit_client_decisions_total
// {result: allowed, denied, failure_mode},
// shardlimit_client_failure_mode_answers_total {reason: deadline,
// unavailable, error}, shardlimit_client_check_duration_seconds (a
// histogram per Check, CheckOne or CheckBatch call) and
// shardlimit_client_retries_total {reason: not_sent, connection_lost}.
//
// Callers: services directly, and the net/http middleware in httpmw. The
// client never decides a check from a counter of its own, never retries a
// request that may have been counted more than once, never blocks past its
// deadline, and never logs users, API keys or tokens.
package client
