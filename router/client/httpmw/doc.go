// Package httpmw is net/http middleware that rate limits requests through a
// shardlimit client: each request becomes one check of (Options.Service,
// the request's endpoint, the caller's key). Responses carry the
// RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10, one policy per rule that
// applied, complete from the decision (name, quota, window; t the wait
// until more quota is available). A denied check is answered, without
// calling the wrapped handler, with Retry-After and, by default, 429 Too
// Many Requests and the draft's quota-exceeded problem details
// (application/problem+json); Options.Denied replaces that answer.
//
// Services call New once at start-up and wrap their handlers with the
// result. The middleware calls as the client's caller: its credentials are
// the client's options (client.Options.TLS, Token), so the service checks
// its own services only. The key is a header (a user id set by an authenticating proxy),
// an API key header, or the client's IP; forwarding headers are believed
// only from peers in Options.TrustedProxies, right-most untrusted hop first,
// so a client cannot choose its own key by sending X-Forwarded-For.
//
// It must never let a request through that the client denied, never write
// an API key or a user id to a log or a response, and never turn a limiter
// outage into an error of its own: when no router answers it follows the
// client's failure mode.
package httpmw
