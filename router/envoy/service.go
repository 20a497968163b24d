package envoy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard/auth"
)

// Decider decides checks bound to their rules. *router.Router is one.
type Decider interface {
	// Rules returns the rules in use now.
	Rules() *rules.Set
	// Decide decides checks already bound to their rules, one decision
	// per entry, in order; shard failures are answered by each rule's
	// failure policy inside.
	Decide(ctx context.Context, checks []rules.Resolved) []*shardlimitv1.Decision
}

// ErrInvalidRequest marks every rejected request; it is answered with
// INVALID_ARGUMENT.
var ErrInvalidRequest = errors.New("invalid rate limit request")

// Register registers the rate limit service v3 on s, deciding with d, and
// returns it for servers that are not gRPC's (the router's HTTP API serves
// it as /json): one service, so its metrics are registered once. It panics
// if opts are invalid: a programmer's mistake at start-up.
func Register(s grpc.ServiceRegistrar, d Decider, opts Options) rlsv3.RateLimitServiceServer {
	svc := newService(d, opts)
	rlsv3.RegisterRateLimitServiceServer(s, svc)
	return svc
}

type service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	d    Decider
	opts Options
	log  *slog.Logger
	// descriptors counts what envoy ratelimit's model decided; nil
	// without Options.Registerer.
	descriptors *prometheus.CounterVec
}

func newService(d Decider, opts Options) *service {
	opts.fill()
	if err := opts.validate(); err != nil {
		panic(fmt.Sprintf("envoy.Register: %v", err))
	}
	if d == nil {
		panic("envoy.Register: nil Decider")
	}
	s := &service{d: d, opts: opts, log: opts.Logger}
	if opts.Registerer != nil {
		s.descriptors = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardlimit_router_envoy_descriptors_total",
			Help: "Envoy descriptors decided by envoy ratelimit's model, by service (domain), rule and kind: answered without counting (unlimited, deny_all, replaced: not in shardlimit_router_decisions_total), or carrying their own limit (override: applied; override_refused: the rule does not allow it).",
		}, []string{"service", "rule", "kind"})
		opts.Registerer.MustRegister(s.descriptors)
	}
	return s
}

// ShouldRateLimit implements envoy.service.ratelimit.v3.RateLimitService.
func (s *service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	hits, err := validate(req)
	if err != nil {
		return nil, toStatus(err)
	}
	// The domain is the service whose rules decide: the caller must hold it.
	if err := auth.FromContext(ctx).MayUse(req.Domain); err != nil {
		return nil, err
	}
	var candidates []*rules.Rule
	if set := s.d.Rules(); set != nil {
		candidates = set.Descriptors(req.Domain)
	}
	if s.opts.Traced {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("shardlimit.domain", req.Domain), attribute.Int("shardlimit.descriptors", len(req.Descriptors)))
	}
	outcomes, err := resolve(candidates, req, hits, s.opts.MaxCounterLength)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(outcomes))}
	var checks []rules.Resolved
	var idx []int // descriptor of each check
	for i, o := range outcomes {
		if o.kind != "" && s.descriptors != nil {
			s.descriptors.WithLabelValues(req.Domain, o.check.Rule.Name, o.kind).Inc()
		}
		if o.answer != nil {
			resp.Statuses[i] = o.answer
			if o.answer.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
				resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			continue
		}
		checks = append(checks, o.check)
		idx = append(idx, i)
	}
	if len(checks) == 0 {
		s.traceCode(ctx, resp)
		return resp, nil
	}
	decisions := s.d.Decide(ctx, checks)
	if len(decisions) != len(checks) {
		s.log.Error("envoy: decider answered the wrong number of decisions", "domain", req.Domain, "checks", len(checks), "decisions", len(decisions))
		return nil, status.Errorf(codes.Internal, "decided %d of %d descriptors", len(decisions), len(checks))
	}
	var states []limitState
	if s.opts.Headers {
		states = make([]limitState, 0, len(checks))
	}
	for j, d := range decisions {
		c := &checks[j]
		if d == nil {
			s.log.Error("envoy: decider answered a nil decision", "domain", req.Domain, "rule", c.Rule.Name)
			return nil, status.Error(codes.Internal, "a descriptor was left undecided")
		}
		st := descriptorStatus(c.Rule, d)
		resp.Statuses[idx[j]] = st
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if s.opts.Headers {
			states = append(states, stateOf(c.Rule, d))
		}
	}
	if s.opts.Headers {
		resp.ResponseHeadersToAdd = headers(states)
	}
	resp.DynamicMetadata = policyMetadata(idx, decisions)
	s.traceCode(ctx, resp)
	return resp, nil
}

// traceCode puts the answer's overall code on the call's span.
func (s *service) traceCode(ctx context.Context, resp *rlsv3.RateLimitResponse) {
	if s.opts.Traced {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("shardlimit.overall_code", resp.OverallCode.String()))
	}
}

// descriptorStatus is Envoy's status of a descriptor that rule decided.
//
// A denial is OVER_LIMIT, anything allowed is OK: shadow rules (always
// allowed), the soft allowance, and a leaky_bucket's queueing delay, which
// Envoy cannot wait out. A descriptor decided by failure policy has its
// code but no current_limit, remaining or reset: no counter was read, and
// Envoy's own headers would otherwise advertise a quota nobody measured;
// the response's dynamic_metadata marks it (policyMetadata).
func descriptorStatus(rule *rules.Rule, d *shardlimitv1.Decision) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	if !d.Allowed {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if d.FailurePolicy {
		return st
	}
	st.CurrentLimit = CurrentLimit(rule.Name, limitOf(rule, d), time.Duration(rule.Period))
	st.LimitRemaining = clampUint32(float64(max(d.Remaining, 0)))
	st.DurationUntilReset = durationpb.New(max(d.GetResetAfter().AsDuration(), 0))
	return st
}

// limitOf is the limit that was enforced: the decision's (a rule's soft
// and elastic allowances raise it), else the rule's.
func limitOf(rule *rules.Rule, d *shardlimitv1.Decision) int64 {
	if d.Limit > 0 {
		return d.Limit
	}
	return rule.Limit
}

func stateOf(rule *rules.Rule, d *shardlimitv1.Decision) limitState {
	return limitState{
		name:       rule.Name,
		limit:      limitOf(rule, d),
		period:     time.Duration(rule.Period),
		remaining:  d.Remaining,
		nextAfter:  d.GetNextAfter().AsDuration(),
		overLimit:  !d.Allowed,
		retryAfter: d.GetRetryAfter().AsDuration(),
		byPolicy:   d.FailurePolicy,
		shadow:     d.Shadow,
	}
}

// validate checks req against every bound before anything is counted, and
// returns each descriptor's hits: the descriptor's hits_addend when set (0
// reads the counter without consuming), else the request's, where 0 (or
// absent) means 1, as Envoy does.
func validate(req *rlsv3.RateLimitRequest) ([]int64, error) {
	bad := func(field, format string, args ...any) ([]int64, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrInvalidRequest, field, fmt.Sprintf(format, args...))
	}
	switch {
	case req.Domain == "":
		return bad("domain", "required")
	case len(req.Domain) > rules.MaxServiceLength:
		return bad("domain", "length %d exceeds the maximum of %d bytes", len(req.Domain), rules.MaxServiceLength)
	case !utf8.ValidString(req.Domain): // gRPC requests never get here with it (shard/rpc answers them)
		return bad("domain", "invalid UTF-8")
	case len(req.Descriptors) == 0:
		return bad("descriptors", "at least 1 descriptor is required")
	case len(req.Descriptors) > MaxDescriptors:
		return bad("descriptors", "%d descriptors exceed the maximum of %d per request", len(req.Descriptors), MaxDescriptors)
	case req.HitsAddend > MaxHits:
		return bad("hits_addend", "%d exceeds the maximum of %d", req.HitsAddend, MaxHits)
	}
	reqHits := max(int64(req.HitsAddend), 1)
	hits := make([]int64, len(req.Descriptors))
	for i, d := range req.Descriptors {
		if err := validateDescriptor(i, d); err != nil {
			return nil, err
		}
		if err := validateOverride(i, d.GetLimit()); err != nil {
			return nil, err
		}
		hits[i] = reqHits
		if h := d.GetHitsAddend(); h != nil {
			if h.Value > MaxHits {
				return bad(fmt.Sprintf("descriptors[%d].hits_addend", i), "%d exceeds the maximum of %d", h.Value, MaxHits)
			}
			hits[i] = int64(h.Value)
		}
	}
	return hits, nil
}

func validateDescriptor(i int, d *ratelimitv3.RateLimitDescriptor) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: descriptors[%d]%s: %s", ErrInvalidRequest, i, field, fmt.Sprintf(format, args...))
	}
	switch {
	case d == nil || len(d.Entries) == 0:
		return bad(".entries", "at least 1 entry is required")
	case len(d.Entries) > MaxEntries:
		return bad(".entries", "%d entries exceed the maximum of %d", len(d.Entries), MaxEntries)
	case d.IsNegativeHits:
		return bad(".is_negative_hits", "returning hits to a limit is not supported")
	}
	for j, e := range d.Entries {
		switch {
		case e.GetKey() == "":
			return bad(fmt.Sprintf(".entries[%d].key", j), "required")
		case !utf8.ValidString(e.GetKey()):
			return bad(fmt.Sprintf(".entries[%d].key", j), "invalid UTF-8")
		case !utf8.ValidString(e.GetValue()):
			return bad(fmt.Sprintf(".entries[%d].value", j), "invalid UTF-8")
		}
	}
	return nil
}

// toStatus maps the package's errors to gRPC status codes, in one place.
func toStatus(err error) error {
	if errors.Is(err, ErrInvalidRequest) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
