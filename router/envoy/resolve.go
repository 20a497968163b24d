package envoy

import (
	"fmt"
	"math"
	"strconv"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/limiter"
)

// outcome is what one descriptor of a request comes to before anything is
// counted: a check to decide, or a status answered without counting.
type outcome struct {
	// answer, when set, is the descriptor's status: no rule matched, the
	// rule was replaced, or it is unlimited or deny_all.
	answer *rlsv3.RateLimitResponse_DescriptorStatus
	// check is the descriptor's check otherwise.
	check rules.Resolved
	// kind, when set, is how envoy ratelimit's model decided it, the kind
	// label of shardlimit_router_envoy_descriptors_total: unlimited,
	// deny_all, replaced, override or override_refused.
	kind string
}

// resolve matches each descriptor of a validated request against the
// domain's rules and works out its outcome, as envoy ratelimit does:
//   - a descriptor no rule matches is OK without a limit;
//   - a rule named in the Replaces of any rule matched by the request is
//     not applied: its descriptor is OK without a limit (a replacing
//     rule's own replacement does not undo it, as in envoy ratelimit);
//   - an unlimited rule answers OK with limit_remaining at its maximum;
//   - a deny_all rule answers OVER_LIMIT (OK in shadow mode);
//   - a descriptor's own limit (Envoy's RateLimitDescriptor.limit), when
//     its rule allows it, replaces the rule's limit and period, on a
//     counter of its own (see overrideSuffix); otherwise it is ignored.
//
// hits are the descriptors' hits from validate. It returns an error
// (ErrInvalidRequest) only for an override its rule allows but the
// algorithm cannot take; then nothing is counted.
func resolve(candidates []*rules.Rule, req *rlsv3.RateLimitRequest, hits []int64, maxCounter int) ([]outcome, error) {
	out := make([]outcome, len(req.Descriptors))
	matched := make([]*rules.Rule, len(req.Descriptors))
	var replaced map[string]bool
	for i, desc := range req.Descriptors {
		rule, counter := Match(candidates, desc.Entries, maxCounter)
		if rule == nil {
			out[i].answer = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			continue
		}
		matched[i] = rule
		for _, n := range rule.Replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[n] = true
		}
		out[i].check = rules.Resolved{Rule: rule, Service: rule.Service, Endpoint: rule.Endpoint, User: counter, Hits: hits[i]}
		if l := desc.GetLimit(); l != nil {
			out[i].kind = "override_refused"
			if rule.AllowRequestOverride {
				o, err := overridden(rule, l, i)
				if err != nil {
					return nil, err
				}
				out[i].check.Rule, out[i].kind = o, "override"
				out[i].check.User = bounded(counter+overrideSuffix(l), maxCounter)
			}
		}
	}
	for i, rule := range matched {
		if rule == nil {
			continue
		}
		rule = out[i].check.Rule // the override's, if any
		switch {
		case replaced[rule.Name]:
			out[i].answer = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			out[i].kind = "replaced"
		case rule.Unlimited:
			out[i].answer = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			out[i].kind = "unlimited"
		case rule.DenyAll:
			out[i].kind = "deny_all"
			st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OVER_LIMIT}
			if rule.Shadow {
				st.Code = rlsv3.RateLimitResponse_OK
			}
			if rule.Period > 0 {
				st.CurrentLimit = CurrentLimit(rule.Name, 0, time.Duration(rule.Period))
			}
			out[i].answer = st
		}
	}
	return out, nil
}

// overrideUnits are the lengths of Envoy's units, as envoy ratelimit
// counts them (a month is 30 days, a year 365).
var overrideUnits = map[typev3.RateLimitUnit]time.Duration{
	typev3.RateLimitUnit_SECOND: time.Second,
	typev3.RateLimitUnit_MINUTE: time.Minute,
	typev3.RateLimitUnit_HOUR:   time.Hour,
	typev3.RateLimitUnit_DAY:    24 * time.Hour,
	typev3.RateLimitUnit_MONTH:  30 * 24 * time.Hour,
	typev3.RateLimitUnit_YEAR:   365 * 24 * time.Hour,
}

// overridePeriod is the period of an override: its unit times its
// unit_multiplier (absent or 0: 1).
func overridePeriod(l *ratelimitv3.RateLimitDescriptor_RateLimitOverride) time.Duration {
	return overrideUnits[l.Unit] * time.Duration(max(l.GetUnitMultiplier().GetValue(), 1))
}

// overridden returns a copy of rule with the descriptor's own limit: a
// rule outside any set, which the router decides with its own parameters.
// A requests_per_unit of 0 denies, as in envoy ratelimit.
func overridden(rule *rules.Rule, l *ratelimitv3.RateLimitDescriptor_RateLimitOverride, i int) (*rules.Rule, error) {
	o := &rules.Rule{
		Name: rule.Name, Service: rule.Service, Descriptor: rule.Descriptor,
		Algorithm: rule.Algorithm, Limit: int64(l.RequestsPerUnit), Period: rules.Duration(overridePeriod(l)),
		MaxDelay: rule.MaxDelay, SoftPercent: rule.SoftPercent, Shadow: rule.Shadow,
		ElasticPercent: rule.ElasticPercent, ElasticLoadPercent: rule.ElasticLoadPercent,
		ConsumeOnDeny: rule.ConsumeOnDeny, FailurePolicy: rule.FailurePolicy,
	}
	if o.Limit == 0 {
		o.Limit, o.DenyAll = 0, true
		return o, nil
	}
	lr := o.Limiter()
	if err := lr.Validate(); err != nil {
		return nil, fmt.Errorf("%w: descriptors[%d].limit: %v", ErrInvalidRequest, i, err)
	}
	return o, nil
}

// overrideSuffix ends the counter name of a descriptor with its own limit,
// so that each override counts apart, as in envoy ratelimit. "\o" never
// occurs in a name built from values (see Match).
func overrideSuffix(l *ratelimitv3.RateLimitDescriptor_RateLimitOverride) string {
	return `\o` + strconv.FormatUint(uint64(l.RequestsPerUnit), 10) + "/" + rules.Duration(overridePeriod(l)).String()
}

// validateOverride checks a descriptor's own limit against the bounds,
// whether or not a rule will allow it.
func validateOverride(i int, l *ratelimitv3.RateLimitDescriptor_RateLimitOverride) error {
	if l == nil {
		return nil
	}
	if _, ok := overrideUnits[l.Unit]; !ok {
		return fmt.Errorf("%w: descriptors[%d].limit.unit: %v is not one of SECOND, MINUTE, HOUR, DAY, MONTH, YEAR", ErrInvalidRequest, i, l.Unit)
	}
	if p := overridePeriod(l); p > limiter.MaxPeriod || p <= 0 {
		return fmt.Errorf("%w: descriptors[%d].limit.unit_multiplier: a period of %d %v exceeds the maximum of %v", ErrInvalidRequest, i, l.GetUnitMultiplier().GetValue(), l.Unit, rules.Duration(limiter.MaxPeriod))
	}
	if int64(l.RequestsPerUnit) > limiter.MaxLimit {
		return fmt.Errorf("%w: descriptors[%d].limit.requests_per_unit: %d exceeds the maximum of %d", ErrInvalidRequest, i, l.RequestsPerUnit, limiter.MaxLimit)
	}
	return nil
}
