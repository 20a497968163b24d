// Package tracing sets up OpenTelemetry tracing for a shardlimit
// component, and carries a trace context where gRPC metadata cannot: in a
// batch of checks that many requests share.
//
// Start builds a component's tracer provider from Options (the
// --otlp-endpoint, --trace-sample-ratio and --otlp-* flags): an OTLP/gRPC
// exporter behind a batching span processor, a parent-based ratio sampler
// and W3C trace context propagation. With no endpoint, tracing is off and
// Start returns a provider whose TracerProvider is nil: components then
// install no gRPC stats handler and start no span, so tracing costs
// nothing. ServerOptions and DialOptions instrument a component's gRPC
// server and clients (otelgrpc stats handlers); Inject and Extract put a
// span's context into a map field of a message and take it out again.
//
// A collector that is down costs spans, never time or a flood of lines:
// OpenTelemetry's errors go to the component's slog logger as WARN
// "tracing error", each distinct one at most once per ErrorWindow (a
// minute); an export gives up after ExportTimeout; Shutdown waits at most
// ShutdownTimeout for the spans still buffered (not at all when the last
// connection attempt to a collector dialed directly, not through a proxy,
// failed) and logs how many spans were never exported.
//
// The router, the shards and the rebalance job call it; cmd/shardlimit
// calls Start. It must never import a component (router, shard host,
// rebalance job), never trace a shard's DecideStream as one span (a stream
// lives for hours; each batch on it has its own span), and never make a
// span when its TracerProvider is nil.
package tracing
