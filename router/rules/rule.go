package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/shard/key"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// Bounds on names, shared with the router's request validation.
const (
	MaxServiceLength  = key.MaxServiceLength
	MaxEndpointLength = key.MaxEndpointLength
	MaxNameLength     = key.MaxRuleLength
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
	// without a rule of its own. Required unless Descriptor is set; then it
	// must be left out (rules stored by older versions hold the form
	// "envoy:key1,key2=value2", which is read as left out).
	Endpoint string `yaml:"endpoint,omitempty" json:"endpoint,omitempty"`
	// Key lists the request attributes whose values name the counter:
	// user, api_key, ip, or several of them; default [user].
	Key []string `yaml:"key,omitempty" json:"key,omitempty"`
	// Descriptor makes the rule match Envoy rate limit descriptors of the
	// service's domain instead of endpoints: the entries in order, each with
	// a key and optionally a value. An entry without a value matches any
	// value, and a value ending in '*' any value starting with what comes
	// before the '*'; at both, the request's value names the counter (one
	// counter per value), as in envoy ratelimit.
	Descriptor []DescriptorEntry `yaml:"descriptor,omitempty" json:"descriptor,omitempty"`
	// Algorithm: token_bucket (default), leaky_bucket, fixed_window,
	// sliding_log, sliding_window or gcra.
	Algorithm string `yaml:"algorithm,omitempty" json:"algorithm,omitempty"`
	// Limit is the number of hits allowed per Period. Required, but for
	// unlimited and deny_all rules.
	Limit int64 `yaml:"limit,omitempty" json:"limit,omitempty"`
	// Period of the limit, like "1s", "1m", "1h" or "1d". Required, but
	// for unlimited and deny_all rules.
	Period Duration `yaml:"period,omitempty" json:"period,omitempty"`
	// Burst is the capacity of the bucket algorithms: the hits a
	// token_bucket or gcra allows back to back, the size of a
	// leaky_bucket's queue. Default Limit. The window algorithms have none:
	// a rule of theirs that sets it is refused (ParseStored drops it from
	// rules stored before that).
	Burst int64 `yaml:"burst,omitempty" json:"burst,omitempty"`
	// MaxDelay, for leaky_bucket only, is the longest a request may wait in
	// the queue: a request that fits in the queue is allowed, and the
	// answer's delay says how long it waits before it is served. Default:
	// the queue's whole drain time, Burst·Period/Limit, so every request
	// that fits is allowed. A shorter MaxDelay denies the requests that
	// would wait longer.
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
	// ConsumeOnDeny keeps this rule's hits consumed when another rule of
	// the same check denies it (a check denied by a per-second rule still
	// counts toward a per-day quota, say); default false: a denied check
	// consumes nothing.
	ConsumeOnDeny bool `yaml:"consume_on_deny,omitempty" json:"consume_on_deny,omitempty"`
	// FailurePolicy is "allow" (default) or "deny": the answer when the
	// owner shard is unreachable or late.
	FailurePolicy string `yaml:"failure_policy,omitempty" json:"failure_policy,omitempty"`

	// The fields below apply to descriptor rules only (envoy ratelimit's
	// rate_limit block); see router/envoy.

	// Unlimited matches descriptors and never limits them: they are
	// answered OK without counting, and this rule, being the most specific
	// match, keeps less specific rules from deciding them (envoy
	// ratelimit's unlimited: true). Limit, period and the other limit
	// fields must be left out. Default false.
	Unlimited bool `yaml:"unlimited,omitempty" json:"unlimited,omitempty"`
	// DenyAll denies every descriptor the rule decides, without counting
	// (envoy ratelimit's requests_per_unit: 0, a block list). Limit must be
	// left out; Period, when given, is the window Envoy is told. Shadow
	// still allows. Default false.
	DenyAll bool `yaml:"deny_all,omitempty" json:"deny_all,omitempty"`
	// Replaces names rules of the service that this rule replaces: when
	// one request's descriptors match this rule and a replaced one, the
	// replaced rule is not applied to its descriptor (answered OK, not
	// counted) and this one is (envoy ratelimit's replaces). Default none.
	Replaces []string `yaml:"replaces,omitempty" json:"replaces,omitempty"`
	// AllowRequestOverride lets a request's descriptor carry its own limit
	// (Envoy's RateLimitDescriptor.limit: requests_per_unit and unit),
	// which then replaces Limit and Period for that descriptor, on a
	// counter of its own per override. Default false: the override is
	// ignored, since a caller must not raise its own limit.
	AllowRequestOverride bool `yaml:"allow_request_override,omitempty" json:"allow_request_override,omitempty"`

	// position is set by NewSet: where the rule is in its set.
	position *position
}

// DescriptorEntry is one entry of an Envoy descriptor pattern.
type DescriptorEntry struct {
	Key   string `yaml:"key" json:"key"`
	Value string `yaml:"value,omitempty" json:"value,omitempty"`
}

// Key attributes.
const (
	KeyUser   = "user"
	KeyAPIKey = "api_key"
	KeyIP     = "ip"
)

// MaxDescriptorEntries bounds a descriptor pattern.
const MaxDescriptorEntries = 8

// Prefix reports whether the entry's value is a prefix wildcard ("foo*"),
// and returns the prefix.
func (e DescriptorEntry) Prefix() (string, bool) {
	return strings.CutSuffix(e.Value, "*")
}

// Wildcard reports whether the request's value at this entry names the
// counter: an entry without a value or with a prefix wildcard.
func (e DescriptorEntry) Wildcard() bool {
	_, prefix := e.Prefix()
	return e.Value == "" || prefix
}

// FormatDescriptor renders a descriptor pattern as "key1,key2=value2":
// how ctl shows a descriptor rule, and a descriptor rule's default name.
func FormatDescriptor(d []DescriptorEntry) string {
	var b strings.Builder
	for i, e := range d {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('=')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}

// legacyEndpoint is the endpoint older versions derived from a descriptor
// and stored with the rule: "envoy:key1,key2=value2".
func legacyEndpoint(d []DescriptorEntry) string { return "envoy:" + FormatDescriptor(d) }

// Target is what the rule applies to, for people: its endpoint, or for a
// descriptor rule "descriptor: key1,key2=value2".
func (r *Rule) Target() string {
	if len(r.Descriptor) > 0 {
		return "descriptor: " + FormatDescriptor(r.Descriptor)
	}
	return r.Endpoint
}

// Counted reports whether the rule's checks are counted on a shard: false
// for unlimited and deny_all rules, which router/envoy answers itself.
func (r *Rule) Counted() bool { return !r.Unlimited && !r.DenyAll }

// Limiter returns the parameters the algorithms need. The rule must be
// valid. Callers work them out once per rule set (the router does when
// rules load), not per check.
func (r *Rule) Limiter() limiter.Rule {
	a, _ := limiter.ParseAlgorithm(r.algorithm())
	return limiter.Rule{
		Algorithm: a, Limit: r.Limit, Period: int64(r.Period), Burst: r.Burst,
		MaxDelay: int64(r.MaxDelay), SoftPercent: r.SoftPercent,
		ElasticPercent: r.ElasticPercent, ElasticLoadPercent: r.ElasticLoadPercent, Shadow: r.Shadow,
	}
}

// Index returns the rule's position in the Set it belongs to (its
// Set.Rules()[Index]), so a caller can keep a table beside the set; -1 for
// a rule outside any set.
func (r *Rule) Index() int {
	if r.position != nil && r.position.rule == r {
		return r.position.index
	}
	return -1
}

// FailOpen reports whether the rule allows when its owner cannot answer.
func (r *Rule) FailOpen() bool { return r.FailurePolicy != FailDeny }

func (r *Rule) algorithm() string {
	if r.Algorithm == "" {
		return limiter.TokenBucket.String()
	}
	return r.Algorithm
}

// dropIgnored clears the fields that the rule's algorithm ignores and
// that older versions stored without complaint: burst on the window
// algorithms.
func (r *Rule) dropIgnored() {
	if a, err := limiter.ParseAlgorithm(r.algorithm()); err == nil && !a.UsesBurst() {
		r.Burst = 0
	}
}

// normalize fills defaults in place.
func (r *Rule) normalize() {
	if len(r.Descriptor) > 0 && r.Endpoint == legacyEndpoint(r.Descriptor) {
		r.Endpoint = ""
	}
	if len(r.Key) == 0 && len(r.Descriptor) == 0 {
		r.Key = []string{KeyUser}
	}
	if r.Name == "" {
		r.Name = r.Endpoint
		switch {
		case len(r.Descriptor) > 0:
			r.Name = FormatDescriptor(r.Descriptor)
		case r.Endpoint == "*":
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
	if len(r.Descriptor) > 0 {
		if r.Endpoint != "" {
			bad("endpoint", "must be left out when descriptor is set")
		}
		if len(r.Key) > 0 {
			bad("key", "must be left out when descriptor is set: the descriptor's values name the counter")
		}
		if len(r.Descriptor) > MaxDescriptorEntries {
			bad("descriptor", "%d entries exceed the maximum of %d", len(r.Descriptor), MaxDescriptorEntries)
		}
		for i, e := range r.Descriptor {
			if e.Key == "" || strings.ContainsAny(e.Key, ",=\x00\n") || strings.ContainsAny(e.Value, ",\x00\n") {
				bad(fmt.Sprintf("descriptor[%d]", i), "key is required; key must not hold ',' '=' NUL or newline, value must not hold ',' NUL or newline")
			}
		}
	} else {
		checkName("endpoint", r.Endpoint, MaxEndpointLength, true)
		r.validateEnvoyOnly(bad)
	}
	r.validateReplaces(bad)
	seen := map[string]bool{}
	for _, k := range r.Key {
		switch {
		case k != KeyUser && k != KeyAPIKey && k != KeyIP:
			bad("key", "%q is not one of user, api_key, ip", k)
		case seen[k]:
			bad("key", "%q listed twice", k)
		}
		seen[k] = true
	}
	checkName("name", r.Name, MaxNameLength, false)
	a, err := limiter.ParseAlgorithm(r.algorithm())
	if err != nil {
		bad("algorithm", "%v", err)
	}
	if r.FailurePolicy != FailAllow && r.FailurePolicy != FailDeny {
		bad("failure_policy", "%q is not allow or deny", r.FailurePolicy)
	}
	if !r.Counted() {
		r.validateUncounted(bad)
		return errs
	}
	lr := r.Limiter()
	if a != limiter.Unspecified && r.Burst != 0 && !a.UsesBurst() {
		errs = append(errs, fmt.Errorf("%w: burst: %w: only token_bucket, leaky_bucket and gcra have a burst, not %v", ErrInvalid, limiter.ErrNotApplicable, a))
		lr.Burst = 0 // reported: its bounds say nothing more
	}
	for _, err := range boundErrors(lr, a != limiter.Unspecified) {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err)) // "field: ...", limiter's sentinel kept
	}
	return errs
}

// boundErrors returns every bound of the shard's parameters that lr breaks.
// limiter.Rule.Validate stops at the first, so each field is checked alone,
// over a neutral rule (limit 1 per millisecond, nothing else set) that no
// other bound can fail; only when every field is valid alone is the whole
// rule checked, for the bounds that join fields (a burst that takes too
// long to refill, say), so that a bad field is never reported again as the
// consequence of another. Without a known algorithm the bounds that depend
// on it (max_delay, and those that join fields) are not checked.
func boundErrors(lr limiter.Rule, knownAlgorithm bool) []error {
	alg := lr.Algorithm
	if !knownAlgorithm {
		alg = limiter.FixedWindow
	}
	neutral := func(set func(*limiter.Rule)) limiter.Rule {
		n := limiter.Rule{Algorithm: alg, Limit: 1, Period: int64(limiter.MinPeriod)}
		set(&n)
		return n
	}
	alone := []limiter.Rule{
		neutral(func(n *limiter.Rule) { n.Limit = lr.Limit }),
		neutral(func(n *limiter.Rule) { n.Period = lr.Period }),
		neutral(func(n *limiter.Rule) { n.Burst = lr.Burst }),
		neutral(func(n *limiter.Rule) { n.SoftPercent = lr.SoftPercent }),
		neutral(func(n *limiter.Rule) {
			n.ElasticPercent, n.ElasticLoadPercent = lr.ElasticPercent, lr.ElasticLoadPercent
		}),
	}
	if knownAlgorithm {
		alone = append(alone, neutral(func(n *limiter.Rule) { n.MaxDelay = lr.MaxDelay }))
	}
	var errs []error
	failed := map[string]bool{}
	for _, n := range alone {
		if err := n.Validate(); err != nil {
			field, _, _ := strings.Cut(err.Error(), ":")
			if !failed[field] {
				errs = append(errs, err)
			}
			failed[field] = true
		}
	}
	if knownAlgorithm && len(errs) == 0 {
		if err := lr.Validate(); err != nil {
			errs = append(errs, err)
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
	t := time.Duration(d)
	if t >= day && t%day == 0 {
		return fmt.Sprintf("%dd", t/day)
	}
	s := t.String()
	if t >= time.Minute { // "1h0m0s" → "1h", "1m0s" → "1m", "1m30s" stays
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
	}
	return s
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

// Resolved is one check bound to one of its rules: what the router decides
// on a shard. User is the counter's name within the rule, built from the
// rule's key attributes (see CounterUser).
type Resolved struct {
	Rule              *Rule
	Service, Endpoint string
	User              string
	Hits              int64
}

// Attributes are a check's request attributes that a rule's key may name.
type Attributes struct {
	User, APIKey, IP string
}

// CounterUser builds the name of the counter a check uses under r, from the
// attributes r.Key lists, joined by '|'. An API key is replaced by a
// fingerprint ("key:" and 16 hex digits of its SHA-256), so that counters,
// logs and hot-key lists never hold the key. It returns the first missing
// attribute's name when one is empty.
func (r *Rule) CounterUser(a Attributes) (user, missing string) {
	if len(r.Key) == 1 && r.Key[0] == KeyUser { // the common case, without allocating
		if a.User == "" {
			return "", KeyUser
		}
		return a.User, ""
	}
	parts := make([]string, 0, len(r.Key))
	for _, k := range r.Key {
		switch k {
		case KeyUser:
			if a.User == "" {
				return "", KeyUser
			}
			parts = append(parts, a.User)
		case KeyAPIKey:
			if a.APIKey == "" {
				return "", KeyAPIKey
			}
			sum := sha256.Sum256([]byte(a.APIKey))
			parts = append(parts, "key:"+hex.EncodeToString(sum[:8]))
		case KeyIP:
			if a.IP == "" {
				return "", KeyIP
			}
			parts = append(parts, a.IP)
		}
	}
	return strings.Join(parts, "|"), ""
}
