package tracing

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// Propagator is the W3C trace context (traceparent, tracestate) that every
// component reads and writes, in gRPC metadata and in messages.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// untraced are the methods the stats handlers leave alone: the shard's
// DecideStream lives as long as a router's connection, so each batch on it
// has a span of its own (the router's and the shard's), as has a unary
// Decide, which carries the batch's trace context in the request; health
// probes would only be noise.
var untraced = map[string]bool{
	"/shardlimit.v1.Shard/Decide":            true,
	"/shardlimit.v1.Shard/DecideStream":      true,
	"/shardlimit.v1.RateLimiter/CheckStream": true, // a span per message instead (router/checkstream.go)
	"/grpc.health.v1.Health/Check":           true,
	"/grpc.health.v1.Health/Watch":           true,
}

func traced(info *stats.RPCTagInfo) bool { return !untraced[info.FullMethodName] }

func handlerOptions(tp trace.TracerProvider) []otelgrpc.Option {
	return []otelgrpc.Option{
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()), // metrics are Prometheus'
		otelgrpc.WithPropagators(Propagator),
		otelgrpc.WithFilter(traced),
	}
}

// ServerOptions returns the options that give each call a gRPC server
// span, joined to the caller's trace context; none when tp is nil.
func ServerOptions(tp trace.TracerProvider) []grpc.ServerOption {
	if tp == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(handlerOptions(tp)...))}
}

// DialOptions returns the options that give each call a gRPC client span
// and send its trace context; none when tp is nil.
func DialOptions(tp trace.TracerProvider) []grpc.DialOption {
	if tp == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(handlerOptions(tp)...))}
}

// Tracer returns the tracer of a component's package, or nil when tp is
// nil (tracing off).
func Tracer(tp trace.TracerProvider, pkg string) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(pkg)
}

// Inject returns the trace context of ctx's span as a map for a message
// field (traceparent, and tracestate when set); nil when ctx has no
// sampled span.
func Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return nil
	}
	m := propagation.MapCarrier{}
	Propagator.Inject(ctx, m)
	return m
}

// Extract returns ctx with the remote span context that Inject put in m;
// ctx itself when m holds none.
func Extract(ctx context.Context, m map[string]string) context.Context {
	if len(m) == 0 {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.MapCarrier(m))
}

// End ends span, marked failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
