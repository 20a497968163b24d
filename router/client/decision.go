package client

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"
	"unicode/utf8"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

// Errors returned instead of a decision. Errors from a router keep their
// gRPC status: status.Code(err) still reports it.
var (
	// ErrInvalidCheck: a check failed validation, in the client or in the
	// router (INVALID_ARGUMENT); nothing was counted. The message names the
	// field and the bound.
	ErrInvalidCheck = errors.New("invalid check")
	// ErrUnknownService: the routers have no rules for a check's service
	// (NOT_FOUND); nothing was counted.
	ErrUnknownService = errors.New("no rules for service")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("shardlimit client closed")
)

// Check asks whether a caller may call (Service, Endpoint) now. Which of
// User, APIKey and IP name the counter is up to the rule; the ones a rule
// keys by are required.
type Check struct {
	Service  string
	Endpoint string
	User     string
	// APIKey is sent as the check's api_key; routers and shards keep only a
	// fingerprint of it.
	APIKey string
	// IP is the client's address, for rules keyed by ip.
	IP string
	// Hits is the cost of the call, ≥ 0; 0 reads the current state without
	// consuming anything. Unlike the wire format, there is no implicit 1:
	// set it.
	Hits int64
}

// Decision is the answer to one check: every field of the public API's
// Decision, as Go types, plus FromFailureMode.
type Decision struct {
	// Allowed says whether the call may proceed.
	Allowed bool
	// Limit is the rule's limit per period; 0 when no rule applies.
	Limit int64
	// Remaining is the hits still available now.
	Remaining int64
	// ResetAfter is the time until the key is back to a fresh state.
	ResetAfter time.Duration
	// RetryAfter, when denied, is the wait after which the same check is
	// allowed if nothing else consumes in between. Zero when allowed;
	// RetryNever when NeverAllowed.
	RetryAfter time.Duration
	// NeverAllowed: denied, and no wait lifts the denial (the check's hits
	// are over what the rule ever allows); RetryAfter is RetryNever, and
	// String and LogValue show it as retry_after=never.
	NeverAllowed bool
	// Rule names the rule that decided; empty when no rule applies.
	Rule string
	// FailurePolicy: the router could not reach the owner shard in time and
	// answered by the rule's failure policy, not from a counter.
	FailurePolicy bool
	// Overload: the router was overloaded and shed the check without
	// asking its shard; FailurePolicy is set too.
	Overload bool
	// Delay, for leaky_bucket rules, is how long the request waits in the
	// queue: how long the caller must wait before going ahead when allowed.
	Delay time.Duration
	// SoftAllowanceUsed: allowed within the rule's soft allowance, over its
	// limit.
	SoftAllowanceUsed bool
	// Shadow: the rule is in shadow mode, so Allowed is always true and
	// ShadowDenied says whether it would have been denied.
	Shadow       bool
	ShadowDenied bool
	// FromFailureMode: no router answered in time and the client answered
	// by its own Options.FailureMode. Only Allowed and RetryAfter are set.
	FromFailureMode bool
	// Window is the deciding rule's period: with Rule and Limit, its quota
	// policy ("Limit hits per Window"). 0 when no rule applies.
	Window time.Duration
	// NextAfter is the wait until Remaining grows by at least 1 (more quota
	// becomes available) if nothing else consumes in between; 0 when it
	// cannot grow. Waiting it with Remaining 0 is enough for one more hit.
	NextAfter time.Duration
	// Quotas holds every rule's own answer when several rules applied to
	// the check (the fields above are the deciding one's); nil otherwise.
	// Policies lists them in either case.
	Quotas []Quota
}

// Quota is one rule's answer to a check: its quota policy (Rule, Limit
// per Window) and its counter's state.
type Quota struct {
	Rule          string
	Limit         int64
	Window        time.Duration
	Allowed       bool
	Remaining     int64
	ResetAfter    time.Duration
	RetryAfter    time.Duration
	NeverAllowed  bool // as Decision.NeverAllowed: RetryAfter is RetryNever
	NextAfter     time.Duration
	FailurePolicy bool
	Shadow        bool
	ShadowDenied  bool
}

// Policies returns every rule's answer: Quotas when several rules applied,
// else the decision's own rule as one Quota, or nil when no rule applied or
// the client answered by its failure mode.
func (d Decision) Policies() []Quota {
	switch {
	case len(d.Quotas) > 0:
		return d.Quotas
	case d.Rule == "" || d.FromFailureMode:
		return nil
	}
	return []Quota{d.quota()}
}

// quota is the decision's own rule's answer.
func (d Decision) quota() Quota {
	return Quota{
		Rule: d.Rule, Limit: d.Limit, Window: d.Window, Allowed: d.Allowed, Remaining: d.Remaining,
		ResetAfter: d.ResetAfter, RetryAfter: d.RetryAfter, NeverAllowed: d.NeverAllowed, NextAfter: d.NextAfter,
		FailurePolicy: d.FailurePolicy, Shadow: d.Shadow, ShadowDenied: d.ShadowDenied,
	}
}

// validate checks what the client can check without knowing the routers'
// configurable bounds, so that obviously bad checks cost no RPC.
func (c *Check) validate(i int) error {
	switch {
	case c.Service == "":
		return fmt.Errorf("%w: checks[%d].service: required", ErrInvalidCheck, i)
	case c.Endpoint == "":
		return fmt.Errorf("%w: checks[%d].endpoint: required", ErrInvalidCheck, i)
	case c.Hits < 0:
		return fmt.Errorf("%w: checks[%d].hits: %d is negative", ErrInvalidCheck, i, c.Hits)
	}
	for _, f := range []struct{ name, v string }{
		{"service", c.Service}, {"endpoint", c.Endpoint}, {"user", c.User}, {"api_key", c.APIKey}, {"ip", c.IP},
	} {
		if !utf8.ValidString(f.v) {
			// A router refuses it too, but over a stream it would cost
			// the message it shares with other callers' checks.
			return fmt.Errorf("%w: checks[%d].%s: invalid UTF-8", ErrInvalidCheck, i, f.name)
		}
	}
	if c.IP != "" {
		if _, err := netip.ParseAddr(c.IP); err != nil {
			return fmt.Errorf("%w: checks[%d].ip: not an IP address", ErrInvalidCheck, i)
		}
	}
	return nil
}

func (c *Check) proto() *shardlimitv1.Check {
	hits := c.Hits
	return &shardlimitv1.Check{
		Service: c.Service, Endpoint: c.Endpoint, User: c.User,
		ApiKey: c.APIKey, Ip: c.IP, Hits: &hits,
	}
}

func fromProto(d *shardlimitv1.Decision) Decision {
	var quotas []Quota
	if qs := d.GetQuotas(); len(qs) > 0 {
		quotas = make([]Quota, len(qs))
		for i, q := range qs {
			retry, never := retryAfter(q.GetAllowed(), q.GetRetryAfter().AsDuration())
			quotas[i] = Quota{
				Rule: q.GetRule(), Limit: q.GetLimit(), Window: q.GetWindow().AsDuration(),
				Allowed: q.GetAllowed(), Remaining: q.GetRemaining(),
				ResetAfter: q.GetResetAfter().AsDuration(), RetryAfter: retry, NeverAllowed: never,
				NextAfter: q.GetNextAfter().AsDuration(), FailurePolicy: q.GetFailurePolicy(),
				Shadow: q.GetShadow(), ShadowDenied: q.GetShadowDenied(),
			}
		}
	}
	retry, never := retryAfter(d.GetAllowed(), d.GetRetryAfter().AsDuration())
	return Decision{
		Window:            d.GetWindow().AsDuration(),
		NextAfter:         d.GetNextAfter().AsDuration(),
		Quotas:            quotas,
		Allowed:           d.GetAllowed(),
		Limit:             d.GetLimit(),
		Remaining:         d.GetRemaining(),
		ResetAfter:        d.GetResetAfter().AsDuration(),
		RetryAfter:        retry,
		NeverAllowed:      never,
		Rule:              d.GetRule(),
		FailurePolicy:     d.GetFailurePolicy(),
		Overload:          d.GetOverload(),
		Delay:             d.GetDelay().AsDuration(),
		SoftAllowanceUsed: d.GetSoftAllowanceUsed(),
		Shadow:            d.GetShadow(),
		ShadowDenied:      d.GetShadowDenied(),
	}
}

// RetryNever is the RetryAfter of a denial that no wait lifts (NeverAllowed):
// the longest time.Duration, which prints as 2562047h47m16s; Decision's
// String and LogValue say "never" instead.
const RetryNever = time.Duration(math.MaxInt64)

// retryAfter is a denial's RetryAfter as the client gives it: the
// limiter's "never" (anything past ratelimitheader.Never, ~100 years) is
// RetryNever, with never set.
func retryAfter(allowed bool, d time.Duration) (_ time.Duration, never bool) {
	if !allowed && d > ratelimitheader.Never {
		return RetryNever, true
	}
	return d, false
}
