package router

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/router/request"
	"github.com/shardlimit/shardlimit/router/rules"
)

// Check implements the public API: every rule that applies to a check is
// decided on its owner shard; the check is allowed only if all allow. When
// some deny, the hits that the others took are given back (refunded), so a
// denied check consumes nothing. The steps are package request's; Check
// only wires them to the shards.
func (r *Router) Check(ctx context.Context, req *shardlimitv1.CheckRequest) (*shardlimitv1.CheckResponse, error) {
	start := time.Now()
	defer func() { r.metrics.duration.Observe(time.Since(start).Seconds()) }()
	if err := request.Validate(req, request.Limits{MaxChecks: r.opts.MaxChecks, MaxUserLength: r.opts.MaxUserLength}); err != nil {
		return nil, toStatus(err)
	}
	if err := mayUseAll(ctx, req.Checks); err != nil {
		return nil, err
	}
	resolved, spans, err := request.Resolve(r.Rules(), req.Checks)
	if err != nil {
		return nil, toStatus(err)
	}
	decisions := r.Decide(ctx, resolved)
	if refunds := request.Refunds(resolved, decisions, spans); len(refunds) > 0 {
		r.refund(ctx, resolved, refunds)
	}
	resp := &shardlimitv1.CheckResponse{Decisions: make([]*shardlimitv1.Decision, len(req.Checks))}
	for i, sp := range spans {
		if sp.From == sp.To {
			resp.Decisions[i] = request.Allowed()
			r.metrics.decisions.WithLabelValues(req.Checks[i].Service, "", "", "", resultNoRule).Inc()
			continue
		}
		resp.Decisions[i] = request.Merge(decisions[sp.From:sp.To])
	}
	if r.tracer != nil {
		annotateCheck(ctx, req, resp)
	}
	return resp, nil
}

// refund gives back the hits of the entries idx. Refunds are best effort: a
// refund that fails leaves the hits consumed, which only ever under-admits.
func (r *Router) refund(ctx context.Context, resolved []rules.Resolved, idx []int) {
	refunds := make([]rules.Resolved, len(idx))
	for j, i := range idx {
		refunds[j] = resolved[i]
	}
	r.decide(ctx, refunds, true)
	r.metrics.refunds.Add(float64(len(refunds)))
}

// toStatus maps the request's errors to gRPC status codes.
func toStatus(err error) error {
	switch {
	case errors.Is(err, request.ErrInvalidCheck):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, request.ErrUnknownService):
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
