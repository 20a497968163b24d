package httpmw

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"github.com/shardlimit/shardlimit/router/client"
)

// KeySource says which request attribute names a request's counter.
type KeySource int

const (
	// KeyUserHeader: the value of Options.Header is the check's user, e.g.
	// a user id set by an authenticating proxy. The default.
	KeyUserHeader KeySource = iota
	// KeyAPIKeyHeader: the value of Options.Header is the check's api_key;
	// routers and shards keep only a fingerprint of it. Rules must key by
	// api_key.
	KeyAPIKeyHeader
	// KeyClientIP: the client's IP (see TrustedProxies) is the check's ip.
	// Rules must key by ip.
	KeyClientIP
)

func (k KeySource) String() string {
	switch k {
	case KeyUserHeader:
		return "user-header"
	case KeyAPIKeyHeader:
		return "api-key-header"
	case KeyClientIP:
		return "client-ip"
	}
	return fmt.Sprintf("KeySource(%d)", int(k))
}

// MissingKeyPolicy is the answer to a request whose key cannot be
// determined (its key header is absent or empty).
type MissingKeyPolicy int

const (
	// MissingKeyReject answers 400 Bad Request naming the missing header,
	// without calling the handler. The default: letting such requests
	// through unchecked would let any caller skip the limit by leaving the
	// header out.
	MissingKeyReject MissingKeyPolicy = iota
	// MissingKeyAllow passes the request to the handler without a check,
	// for handlers that authenticate and reject keyless requests
	// themselves.
	MissingKeyAllow
)

// Default headers of the key sources that read one.
const (
	DefaultUserHeader   = "X-User-ID"
	DefaultAPIKeyHeader = "X-API-Key"
)

// Options configure the middleware. The zero value of every field but
// Service means its default.
type Options struct {
	// Service named in every check. Required.
	Service string
	// Endpoint names a request's endpoint; default r.URL.Path.
	Endpoint func(*http.Request) string
	// Key says what names a request's counter; default KeyUserHeader.
	Key KeySource
	// Header is the header KeyUserHeader or KeyAPIKeyHeader reads; default
	// DefaultUserHeader or DefaultAPIKeyHeader.
	Header string
	// MissingKey is the answer when the key header is absent or empty;
	// default MissingKeyReject (400).
	MissingKey MissingKeyPolicy
	// TrustedProxies lists the peers whose ForwardedHeader is believed;
	// default none: the client IP is always the connection's peer. The
	// client IP is sent as the check's ip whatever the Key.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the header trusted proxies report the client in:
	// "X-Forwarded-For" (default), "Forwarded" (RFC 7239), or another
	// header holding a comma-separated list of addresses. Only this one is
	// read: name the one your proxies set, or a client could send the
	// other.
	ForwardedHeader string
	// Hits is the cost of a request; default 1 for every request.
	Hits func(*http.Request) int64
	// OmitHeadersWhenAllowed leaves the RateLimit-Policy and RateLimit
	// fields out of allowed responses; default false: they are set on every
	// response decided by a rule.
	OmitHeadersWhenAllowed bool
	// Denied answers a denied request, after the middleware set
	// Retry-After (unless no wait lifts the denial) and the RateLimit
	// fields on w's headers; the wrapped handler is not called. Default
	// ProblemDenied: 429 with application/problem+json. A custom answer
	// (another status, a page, a JSON error of the API's own shape) may
	// change or drop those headers.
	Denied func(w http.ResponseWriter, r *http.Request, d client.Decision)
	// Logger receives errors that an operator should act on (an unknown
	// service, a closed client), at most one line a second; default
	// slog.Default().
	Logger *slog.Logger
}

func (o *Options) fill() {
	if o.Endpoint == nil {
		o.Endpoint = func(r *http.Request) string { return r.URL.Path }
	}
	if o.Header == "" {
		switch o.Key {
		case KeyUserHeader:
			o.Header = DefaultUserHeader
		case KeyAPIKeyHeader:
			o.Header = DefaultAPIKeyHeader
		}
	}
	if o.ForwardedHeader == "" {
		o.ForwardedHeader = "X-Forwarded-For"
	}
	if o.Hits == nil {
		o.Hits = func(*http.Request) int64 { return 1 }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Denied == nil {
		o.Denied = ProblemDenied
	}
}

func (o *Options) validate() error {
	switch {
	case o.Service == "":
		return fmt.Errorf("service: required")
	case o.Key != KeyUserHeader && o.Key != KeyAPIKeyHeader && o.Key != KeyClientIP:
		return fmt.Errorf("key: %v is not KeyUserHeader, KeyAPIKeyHeader or KeyClientIP", o.Key)
	case o.MissingKey != MissingKeyReject && o.MissingKey != MissingKeyAllow:
		return fmt.Errorf("missing key: %d is not MissingKeyReject or MissingKeyAllow", o.MissingKey)
	case strings.ContainsAny(o.ForwardedHeader, " \t\r\n:"):
		return fmt.Errorf("forwarded header: %q is not a header name", o.ForwardedHeader)
	}
	for i, p := range o.TrustedProxies {
		if !p.IsValid() {
			return fmt.Errorf("trusted proxies[%d]: not a valid prefix", i)
		}
	}
	return nil
}

// ParsePrefixes parses CIDRs ("10.0.0.0/8") or single addresses
// ("192.0.2.1", taken as /32 or /128), the flag form of TrustedProxies.
func ParsePrefixes(ss []string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			ps = append(ps, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not a CIDR or an IP address", s)
		}
		a = a.Unmap().WithZone("")
		ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
	}
	return ps, nil
}
