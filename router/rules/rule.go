package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/shardlimit/shard/limiter"
	"gopkg.in/yaml.v3"
)

// Bounds on names, shared with the router's request validation.
const (
	MaxServiceLength  = 128
	MaxEndpointLength = 256
	MaxNameLength     = 128
)

// Failure policies: what the router answers when the owner shard cannot.
const (
	FailAllow = "allow"
	FailDeny  = "deny"
)

// Rule is one rate limit as an operator writes it.
type Rule struct {
	// Name identifies the rule within its service and names its counters;
	// default "<endpoint>" ("all" for "*"). Renaming a rule starts its
	// counters from zero.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Service the rule applies to. Required.
	Service string `yaml:"service" json:"service"`
	// Endpoint the rule applies to, or "*" for every endpoint of the service
	// without a rule of its own. Required.
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// Algorithm: token_bucket (default), leaky_bucket, fixed_window,
	// sliding_log, sliding_window or gcra.
	Algorithm string `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	// Limit is the number of hits allowed per Period. Required.
	Limit int64 `yaml:"limit" json:"limit"`
	// Period of the limit, like "1s", "1m", "1h" or "1d". Required.
	Period Duration `yaml:"period" json:"period"`
	// Burst is the bucket capacity for bucket algorithms; default Limit.
	Burst int64 `yaml:"burst,omitempty" json:"burst,omitempty"`
	// MaxDelay, for leaky_bucket only, lets a request wait in the queue up
	// to this long instead of being denied; the answer's delay says how
	// long to wait. Default 0: deny rather than queue.
	MaxDelay Duration `yaml:"max_delay,omitempty" json:"max_delay,omitempty"`
	// SoftPercent makes the limit soft: this many percent over the limit are
	// allowed, and such answers say the allowance was used. Default 0: hard.
	SoftPercent int64 `yaml:"soft_percent,omitempty" json:"soft_percent,omitempty"`
	// ElasticPercent lets the limit grow by up to this many percent while
	// the owner shard's load is under ElasticLoadPercent; default 0: fixed.
	ElasticPercent int64 `yaml:"elastic_percent,omitempty" json:"elastic_percent,omitempty"`
	// ElasticLoadPercent is the shard load (percent of its configured
	// capacity) under which an elastic limit grows; required with
	// ElasticPercent.
	ElasticLoadPercent int64 `yaml:"elastic_load_percent,omitempty" json:"elastic_load_percent,omitempty"`
	// Shadow decides and counts but never denies: answers are allowed and
	// say whether they would have been denied. Default false.
	Shadow bool `yaml:"shadow,omitempty" json:"shadow,omitempty"`
	// FailurePolicy is "allow" (default) or "deny": the answer when the
	// owner shard is unreachable or late.
	FailurePolicy string `yaml:"failure_policy,omitempty" json:"failure_policy,omitempty"`
}

// Limiter returns the parameters the algorithms need. The rule must be valid.
func (r *Rule) Limiter() limiter.Rule {
	a, _ := limiter.ParseAlgorithm(r.algorithm())
	return limiter.Rule{
		Algorithm: a, Limit: r.Limit, Period: int64(r.Period), Burst: r.Burst,
		MaxDelay: int64(r.MaxDelay), SoftPercent: r.SoftPercent,
		ElasticPercent: r.ElasticPercent, ElasticLoadPercent: r.ElasticLoadPercent, Shadow: r.Shadow,
	}
}

// FailOpen reports whether the rule allows when its owner cannot answer.
func (r *Rule) FailOpen() bool { return r.FailurePolicy != FailDeny }

func (r *Rule) algorithm() string {
	if r.Algorithm == "" {
		return limiter.TokenBucket.String()
	}
	return r.Algorithm
}

// normalize fills defaults in place.
func (r *Rule) normalize() {
	if r.Name == "" {
		r.Name = r.Endpoint
		if r.Endpoint == "*" {
			r.Name = "all"
		}
	}
	r.Algorithm = r.algorithm()
	if r.FailurePolicy == "" {
		r.FailurePolicy = FailAllow
	}
}

// ErrInvalid marks every validation error.
var ErrInvalid = errors.New("invalid rule")

// Validate returns every problem of a normalized rule, each naming its field.
func (r *Rule) Validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	checkName := func(field, v string, max int, allowStar bool) {
		switch {
		case v == "":
			bad(field, "required")
		case len(v) > max:
			bad(field, "length %d exceeds the maximum of %d bytes", len(v), max)
		case strings.ContainsAny(v, "\x00\n"):
			bad(field, "must not contain NUL or newline")
		case !allowStar && v == "*":
			bad(field, `"*" is only allowed as endpoint`)
		}
	}
	checkName("service", r.Service, MaxServiceLength, false)
	if strings.Contains(r.Service, "/") {
		bad("service", "must not contain '/'")
	}
	checkName("endpoint", r.Endpoint, MaxEndpointLength, true)
	checkName("name", r.Name, MaxNameLength, false)
	a, err := limiter.ParseAlgorithm(r.algorithm())
	if err != nil {
		bad("algorithm", "%v", err)
	}
	if r.FailurePolicy != FailAllow && r.FailurePolicy != FailDeny {
		bad("failure_policy", "%q is not allow or deny", r.FailurePolicy)
	}
	if a != limiter.Unspecified {
		lr := r.Limiter()
		if err := lr.Validate(); err != nil {
			field, detail, _ := strings.Cut(err.Error(), ": ")
			bad(field, "%s", detail)
		}
	}
	return errs
}

// Duration is a time.Duration written as "500ms", "1m", "1h" or "2d".
type Duration time.Duration

// ParseDuration accepts Go durations plus a whole number of days ("7d").
func ParseDuration(s string) (Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 || n > 366 {
			return 0, fmt.Errorf("%q is not a number of days in 0..366", s)
		}
		return Duration(time.Duration(n) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 1s, 1m, 1h or 1d", s)
	}
	return Duration(d), nil
}

// String prints days when the duration is a whole number of them.
func (d Duration) String() string {
	day := 24 * time.Hour
	if t := time.Duration(d); t >= day && t%day == 0 {
		return fmt.Sprintf("%dd", t/day)
	}
	return time.Duration(d).String()
}

// UnmarshalYAML parses a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText writes the duration as a string (used by JSON).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a duration string (used by JSON).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
