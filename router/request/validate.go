package request

import (
	"errors"
	"fmt"
	"net/netip"
	"unicode/utf8"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Sentinel errors of a request, mapped to gRPC status codes by the router
// (InvalidArgument and NotFound).
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

// Limits are the router's configured bounds on a request.
type Limits struct {
	// MaxChecks bounds the checks in one request.
	MaxChecks int
	// MaxUserLength bounds a check's user in bytes.
	MaxUserLength int
}

// Validate checks every field of every check against its bound, before
// anything is counted.
func Validate(req *shardlimitv1.CheckRequest, lim Limits) error {
	n := len(req.Checks)
	if n == 0 {
		return fmt.Errorf("%w: checks: at least 1 check is required", ErrInvalidCheck)
	}
	if n > lim.MaxChecks {
		return fmt.Errorf("%w: checks: %d checks exceed the maximum of %d per request", ErrInvalidCheck, n, lim.MaxChecks)
	}
	for i, c := range req.Checks {
		if err := checkField(i, "service", c.Service, rules.MaxServiceLength); err != nil {
			return err
		}
		if err := checkField(i, "endpoint", c.Endpoint, rules.MaxEndpointLength); err != nil {
			return err
		}
		if len(c.User) > lim.MaxUserLength {
			return fmt.Errorf("%w: checks[%d].user: length %d exceeds the maximum of %d bytes", ErrInvalidCheck, i, len(c.User), lim.MaxUserLength)
		}
		if len(c.ApiKey) > MaxAPIKeyLength {
			return fmt.Errorf("%w: checks[%d].api_key: length %d exceeds the maximum of %d bytes", ErrInvalidCheck, i, len(c.ApiKey), MaxAPIKeyLength)
		}
		// gRPC requests with invalid UTF-8 never get here (shard/rpc
		// answers them); an in-process caller's may.
		for _, f := range []struct{ name, v string }{{"user", c.User}, {"api_key", c.ApiKey}, {"ip", c.Ip}} {
			if !utf8.ValidString(f.v) {
				return fmt.Errorf("%w: checks[%d].%s: invalid UTF-8", ErrInvalidCheck, i, f.name)
			}
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
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: checks[%d].%s: invalid UTF-8", ErrInvalidCheck, i, name)
	}
	return nil
}

// Hits returns the check's cost: 1 when absent.
func Hits(c *shardlimitv1.Check) int64 {
	if c.Hits == nil {
		return 1
	}
	return *c.Hits
}
