package rules

import (
	"strings"
	"time"

	"github.com/shardlimit/shardlimit/shard/limiter"
)

// MaxReplaces bounds a rule's Replaces.
const MaxReplaces = 16

// setField is whether a field is set, by its YAML name.
type setField struct {
	name string
	set  bool
}

// validateEnvoyOnly reports the fields of envoy ratelimit's model set on a
// rule that is not a descriptor rule: only router/envoy applies them.
func (r *Rule) validateEnvoyOnly(bad func(field, format string, args ...any)) {
	for _, f := range []setField{
		{"unlimited", r.Unlimited}, {"deny_all", r.DenyAll},
		{"replaces", len(r.Replaces) > 0}, {"allow_request_override", r.AllowRequestOverride},
	} {
		if f.set {
			bad(f.name, "only for descriptor rules (Envoy's rate limit API)")
		}
	}
}

// validateReplaces checks the names a rule replaces.
func (r *Rule) validateReplaces(bad func(field, format string, args ...any)) {
	if len(r.Replaces) > MaxReplaces {
		bad("replaces", "%d names exceed the maximum of %d", len(r.Replaces), MaxReplaces)
		return
	}
	seen := map[string]bool{}
	for _, n := range r.Replaces {
		switch {
		case n == "":
			bad("replaces", "a name is empty")
		case len(n) > MaxNameLength:
			bad("replaces", "name length %d exceeds the maximum of %d bytes", len(n), MaxNameLength)
		case strings.ContainsAny(n, "\x00\n"):
			bad("replaces", "names must not contain NUL or newline")
		case n == r.Name:
			bad("replaces", "a rule cannot replace itself (%q)", n)
		case seen[n]:
			bad("replaces", "%q listed twice", n)
		}
		seen[n] = true
	}
}

// validateUncounted checks an unlimited or deny_all rule: no field that
// only a counted rule uses may be set, so that none is silently ignored.
func (r *Rule) validateUncounted(bad func(field, format string, args ...any)) {
	what := "unlimited"
	if r.Unlimited && r.DenyAll {
		bad("deny_all", "cannot be combined with unlimited")
	} else if r.DenyAll {
		what = "deny_all"
	}
	for _, f := range []setField{
		{"limit", r.Limit != 0}, {"period", r.Unlimited && r.Period != 0}, {"burst", r.Burst != 0},
		{"max_delay", r.MaxDelay != 0}, {"soft_percent", r.SoftPercent != 0},
		{"elastic_percent", r.ElasticPercent != 0}, {"elastic_load_percent", r.ElasticLoadPercent != 0},
		{"consume_on_deny", r.ConsumeOnDeny}, {"allow_request_override", r.AllowRequestOverride},
	} {
		if f.set {
			bad(f.name, "must be left out with %s", what)
		}
	}
	if p := time.Duration(r.Period); r.DenyAll && p != 0 && (p < limiter.MinPeriod || p > limiter.MaxPeriod) {
		bad("period", "%v not in %v..%v", p, limiter.MinPeriod, Duration(limiter.MaxPeriod))
	}
}
