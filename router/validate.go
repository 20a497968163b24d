package router

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Sentinel errors of request validation, mapped to gRPC codes in toStatus.
var (
	ErrInvalidCheck   = errors.New("invalid check")
	ErrUnknownService = errors.New("no rules for service")
)

// Bounds on a check's fields besides those of the rules package.
const (
	// MaxHits bounds the cost of one check.
	MaxHits = limiter.MaxBurst
	// MaxAPIKeyLength bounds a check's api_key in bytes.
	MaxAPIKeyLength = 512
)

// validate checks every field of every check against its bound, before
// anything is counted.
func (r *Router) validate(req *shardlimitv1.CheckRequest) error {
	n := len(req.Checks)
	if n == 0 {
		return fmt.Errorf("%w: checks: at least 1 check is required", ErrInvalidCheck)
	}
	if n > r.opts.MaxChecks {
		return fmt.Errorf("%w: checks: %d checks exceed the maximum of %d per request", ErrInvalidCheck, n, r.opts.MaxChecks)
	}
	for i, c := range req.Checks {
		if err := checkField(i, "service", c.Service, rules.MaxServiceLength); err != nil {
			return err
		}
		if err := checkField(i, "endpoint", c.Endpoint, rules.MaxEndpointLength); err != nil {
			return err
		}
		if len(c.User) > r.opts.MaxUserLength {
			return fmt.Errorf("%w: checks[%d].user: length %d exceeds the maximum of %d bytes", ErrInvalidCheck, i, len(c.User), r.opts.MaxUserLength)
		}
		if len(c.ApiKey) > MaxAPIKeyLength {
			return fmt.Errorf("%w: checks[%d].api_key: length %d exceeds the maximum of %d bytes", ErrInvalidCheck, i, len(c.ApiKey), MaxAPIKeyLength)
		}
		if c.Ip != "" {
			if _, err := netip.ParseAddr(c.Ip); err != nil {
				return fmt.Errorf("%w: checks[%d].ip: not an IP address", ErrInvalidCheck, i)
			}
		}
		if h := c.GetHits(); c.Hits != nil && (h < 0 || h > MaxHits) {
			return fmt.Errorf("%w: checks[%d].hits: %d not in 0..%d", ErrInvalidCheck, i, h, MaxHits)
		}
	}
	return nil
}

func checkField(i int, name, v string, max int) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: checks[%d].%s: required", ErrInvalidCheck, i, name)
	case len(v) > max:
		return fmt.Errorf("%w: checks[%d].%s: length %d exceeds the maximum of %d bytes", ErrInvalidCheck, i, name, len(v), max)
	}
	return nil
}

// hits returns the check's cost: 1 when absent.
func hits(c *shardlimitv1.Check) int64 {
	if c.Hits == nil {
		return 1
	}
	return *c.Hits
}
