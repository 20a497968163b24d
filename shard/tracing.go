package shard

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// spanBatch is the name of a shard's span for one batch of checks.
const spanBatch = "shardlimit.shard/batch"

// startBatch starts the span of a batch in the trace of the router's call
// that carried it (the request's trace_context): a batch has no gRPC span
// of its own, as one DecideStream carries many.
func (s *Server) startBatch(ctx context.Context, req *shardlimitv1.DecideRequest) trace.Span {
	refunds := 0
	for _, c := range req.Checks {
		if c.Refund {
			refunds++
		}
	}
	_, span := s.tracer.Start(tracing.Extract(ctx, req.TraceContext), spanBatch, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("shardlimit.shard", s.opts.ID), attribute.Int("shardlimit.checks", len(req.Checks)),
			attribute.Int("shardlimit.refunds", refunds), attribute.Int("shardlimit.rules", len(req.Rules))))
	return span
}
