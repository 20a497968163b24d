package bench

import (
	"context"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/envoy"
)

// request is one worker's request message, built once and reused: each
// call only changes the users in it. It is not safe for concurrent use.
type request interface {
	// draw puts freshly drawn users into the message.
	draw(p *picker, names []string)
	// send sends the message to t and waits for the answer.
	send(ctx context.Context, t endpoint) error
	// tally counts the last answer's decisions into s; false when the
	// answer does not have one decision per check.
	tally(s *stats) bool
}

func newRequest(o *Options) request {
	switch o.API {
	case APIEnvoy:
		return newEnvoyRequest(o)
	case APIHTTP:
		return &httpRequest{publicRequest: *newPublicRequest(o)}
	case APIClient, APIClientStream:
		return newGoClientRequest(o)
	}
	return newPublicRequest(o)
}

// methodOf names the gRPC method an API calls, or the HTTP route.
func methodOf(api string) string {
	switch api {
	case APIEnvoy:
		return rlsv3.RateLimitService_ShouldRateLimit_FullMethodName
	case APIHTTP:
		return "POST /v1/check"
	case APIClientStream:
		return shardlimitv1.RateLimiter_CheckStream_FullMethodName
	}
	return shardlimitv1.RateLimiter_Check_FullMethodName
}

type publicRequest struct {
	req  *shardlimitv1.CheckRequest
	resp *shardlimitv1.CheckResponse
}

func newPublicRequest(o *Options) *publicRequest {
	checks := make([]*shardlimitv1.Check, o.Checks)
	for i := range checks {
		checks[i] = &shardlimitv1.Check{Service: o.Service, Endpoint: o.Endpoint}
	}
	return &publicRequest{req: &shardlimitv1.CheckRequest{Checks: checks}, resp: &shardlimitv1.CheckResponse{}}
}

func (r *publicRequest) draw(p *picker, names []string) {
	for _, c := range r.req.Checks {
		c.User = p.user(names)
	}
}

func (r *publicRequest) send(ctx context.Context, t endpoint) error {
	return t.conn.Invoke(ctx, shardlimitv1.RateLimiter_Check_FullMethodName, r.req, r.resp)
}

func (r *publicRequest) tally(s *stats) bool {
	ds := r.resp.Decisions
	if len(ds) != len(r.req.Checks) {
		return false
	}
	for _, d := range ds {
		s.count(d.FailurePolicy, d.Allowed, d.Rule)
	}
	return true
}

// count counts one check's answer: by policy, else allowed (and without a
// rule when rule is empty) or denied.
func (s *stats) count(byPolicy, allowed bool, rule string) {
	switch {
	case byPolicy:
		s.policy++
	case allowed:
		s.allowed++
		if rule == "" {
			s.noRule++
		}
	default:
		s.denied++
	}
}

type envoyRequest struct {
	req     *rlsv3.RateLimitRequest
	entries []*ratelimitv3.RateLimitDescriptor_Entry // the user entry of each descriptor
	resp    *rlsv3.RateLimitResponse
}

func newEnvoyRequest(o *Options) *envoyRequest {
	r := &envoyRequest{req: &rlsv3.RateLimitRequest{Domain: o.Domain}, resp: &rlsv3.RateLimitResponse{}}
	for range o.Checks {
		e := &ratelimitv3.RateLimitDescriptor_Entry{Key: o.DescriptorKey}
		r.entries = append(r.entries, e)
		r.req.Descriptors = append(r.req.Descriptors, &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{e}})
	}
	return r
}

func (r *envoyRequest) draw(p *picker, names []string) {
	for _, e := range r.entries {
		e.Value = p.user(names)
	}
}

func (r *envoyRequest) send(ctx context.Context, t endpoint) error {
	return t.conn.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, r.req, r.resp)
}

// tally counts the descriptors that the answer's dynamic metadata marks as
// answered by failure policy (envoy.FailurePolicyOf) as policy, whatever
// their code; of the others, OVER_LIMIT as denied and OK as allowed, and
// OK without a current limit (no rule matched) in noRule too.
func (r *envoyRequest) tally(s *stats) bool {
	sts := r.resp.Statuses
	if len(sts) != len(r.req.Descriptors) {
		return false
	}
	byPolicy, _ := envoy.FailurePolicyOf(r.resp)
	for i, st := range sts {
		if byPolicy != nil && byPolicy[i] {
			s.policy++
			continue
		}
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			s.denied++
			continue
		}
		s.allowed++
		if st.CurrentLimit == nil {
			s.noRule++
		}
	}
	return true
}
