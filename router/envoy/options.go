package envoy

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds on a request, beyond those of gRPC's message size.
const (
	// MaxDescriptors bounds the descriptors of one request.
	MaxDescriptors = 100
	// MaxEntries bounds the entries of one descriptor; a rule has at most
	// rules.MaxDescriptorEntries, so longer descriptors can match nothing.
	MaxEntries = 64
	// MaxHits bounds hits_addend, as Envoy itself does.
	MaxHits = 1_000_000_000
)

// Options configure the service.
type Options struct {
	// Headers adds the response headers of
	// draft-ietf-httpapi-ratelimit-headers-10 (RateLimit-Policy and
	// RateLimit, plus Retry-After when over limit) to every answer with a
	// matched rule; default false: Envoy's own enable_x_ratelimit_headers,
	// which works from the statuses' current_limit, is the usual place.
	Headers bool
	// MaxCounterLength bounds the name of a counter built from descriptor
	// values; a longer name is replaced by a fingerprint of it (see
	// Match). Default 256, the router's default bound on a user.
	MaxCounterLength int
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, gets shardlimit_router_envoy_descriptors_total;
	// default nil: not counted (a second service on one router, in tests).
	Registerer prometheus.Registerer
	// Traced sets the domain, the descriptor count and the overall code
	// on each call's span (the router's gRPC server span); default false:
	// tracing is off, and the span is not even looked for.
	Traced bool
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{MaxCounterLength: 256, Logger: slog.Default()}
}

func (o *Options) fill() {
	d := DefaultOptions()
	if o.MaxCounterLength == 0 {
		o.MaxCounterLength = d.MaxCounterLength
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
}

func (o *Options) validate() error {
	if o.MaxCounterLength < minCounterLength || o.MaxCounterLength > 4096 {
		return fmt.Errorf("max counter length: %d not in %d..4096", o.MaxCounterLength, minCounterLength)
	}
	return nil
}
