package router

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// Tracing, when Options.Tracer is set. A request's span is its gRPC server
// span (tracing.ServerOptions), with the request's figures as attributes.
// A request's checks for one shard (a part) wait in the shard's queue and
// then for the call that carries them: that wait is a child span of the
// request's, "shardlimit.router/wait", ended when the part is answered,
// with how it was answered. The call itself carries the parts of many
// requests: its span, "shardlimit.router/batch", is a child of the first
// traced part it carries and links to the others, and each of those parts
// links back to it, so every request's trace leads to the call that
// decided it. The call's span context travels to the shard in the
// request's trace_context, where the shard's span for the batch joins it.
// With tracing off, r.tracer is nil and none of this runs.

// tracerName is the instrumentation scope of the router's spans.
const tracerName = "github.com/shardlimit/shardlimit/router"

// Span names, and the outcomes of a part's wait.
const (
	spanWait  = "shardlimit.router/wait"
	spanBatch = "shardlimit.router/batch"

	outcomeDecided     = "decided"
	outcomeOverload    = "overload"
	outcomeCircuitOpen = "policy:circuit_open"
	outcomeQueued      = "policy:queued"
	outcomeError       = "policy:error"
	outcomeDeadline    = "policy:deadline"
	outcomeNotDecided  = "policy:not_decided" // some checks: the shard did not decide them (takeover)
)

// traced reports whether ctx's request is traced: only then are its
// parts' waits.
func (r *Router) traced(ctx context.Context) bool {
	return r.tracer != nil && trace.SpanFromContext(ctx).IsRecording()
}

// startWait starts the span of pt's wait for its shard.
func (r *Router) startWait(ctx context.Context, pt *part) {
	_, pt.span = r.tracer.Start(ctx, spanWait, trace.WithAttributes(
		attribute.String("shardlimit.shard", pt.peer.member.ID), attribute.Int("shardlimit.checks", len(pt.idx))))
}

// startBatch starts the span of a call to p that carries parts, n checks
// in all: nil when no part is traced.
func (r *Router) startBatch(p *peer, parts []*part, n int) trace.Span {
	var parent trace.Span
	var links []trace.Link
	for _, pt := range parts {
		switch {
		case pt.span == nil:
		case parent == nil:
			parent = pt.span
		default:
			links = append(links, trace.Link{SpanContext: pt.span.SpanContext()})
		}
	}
	if parent == nil {
		return nil
	}
	_, span := r.tracer.Start(trace.ContextWithSpan(context.Background(), parent), spanBatch,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("shardlimit.shard", p.member.ID), attribute.String("shardlimit.shard_addr", p.member.Addr),
			attribute.Int("shardlimit.checks", n), attribute.Int("shardlimit.requests", len(parts))))
	back := trace.Link{SpanContext: span.SpanContext()}
	for _, pt := range parts {
		if pt.span != nil && pt.span != parent {
			pt.span.AddLink(back)
		}
	}
	return span
}

// injectBatch puts the trace context of a call's span into its request.
func injectBatch(span trace.Span, req *shardlimitv1.DecideRequest) {
	req.TraceContext = tracing.Inject(trace.ContextWithSpan(context.Background(), span))
}

// annotateCheck sets a request's figures on its span.
func annotateCheck(ctx context.Context, req *shardlimitv1.CheckRequest, resp *shardlimitv1.CheckResponse) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	allowed, policy := true, 0
	for _, d := range resp.Decisions {
		allowed = allowed && d.Allowed
		if d.FailurePolicy {
			policy++
		}
	}
	attrs := []attribute.KeyValue{attribute.Int("shardlimit.checks", len(req.Checks)), attribute.Bool("shardlimit.allowed", allowed),
		attribute.Int("shardlimit.failure_policy", policy)}
	if len(req.Checks) > 0 {
		c := req.Checks[0]
		attrs = append(attrs, attribute.String("shardlimit.service", c.Service), attribute.String("shardlimit.endpoint", c.Endpoint))
	}
	span.SetAttributes(attrs...)
}
