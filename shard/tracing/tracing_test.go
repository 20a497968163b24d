package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/tracing"
	"github.com/shardlimit/shardlimit/shard/tracing/tracingtest"
)

func TestValidateNamesTheFlag(t *testing.T) {
	for _, c := range []struct {
		change func(*tracing.Options)
		want   error
	}{
		{func(o *tracing.Options) { o.SampleRatio = -0.1 }, tracing.ErrSampleRatio},
		{func(o *tracing.Options) { o.SampleRatio = 1.5 }, tracing.ErrSampleRatio},
		{func(o *tracing.Options) { o.SampleRatio = math.NaN() }, tracing.ErrSampleRatio},
		{func(o *tracing.Options) { o.CertFile = "c.pem" }, tracing.ErrCertPair},
		{func(o *tracing.Options) { o.Insecure, o.CAFile = true, "ca.pem" }, tracing.ErrInsecureTLS},
		{func(o *tracing.Options) { o.SampleRatio = 0 }, nil},
		{func(o *tracing.Options) { o.SampleRatio = 1 }, nil},
	} {
		o := tracing.DefaultOptions()
		c.change(&o)
		if err := o.Validate(); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", o, err, c.want)
		}
	}
	o := tracing.DefaultOptions()
	o.SampleRatio = 2
	if _, err := tracing.Start(context.Background(), o); err == nil || err.Error() != "trace-sample-ratio: must be in 0..1, not 2" {
		t.Errorf("Start: %v, want the flag and the bound named", err)
	}
}

// Without an endpoint tracing is off: no provider, no gRPC options.
func TestOffByDefault(t *testing.T) {
	p, err := tracing.Start(context.Background(), tracing.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if p.TracerProvider != nil || tracing.ServerOptions(p.TracerProvider) != nil || tracing.DialOptions(p.TracerProvider) != nil || tracing.Tracer(p.TracerProvider, "x") != nil {
		t.Error("tracing is on without an endpoint")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// Start exports to an OTLP/gRPC collector over mTLS: the spans arrive with
// their service name.
func TestStartExportsOverMutualTLS(t *testing.T) {
	col, pki := tracingtest.ServeMutualTLS(t)
	o := tracing.DefaultOptions()
	o.Endpoint, o.CAFile, o.CertFile, o.KeyFile, o.Service = col.Addr, pki.Router.CA, pki.Router.Cert, pki.Router.Key, "shardlimit-router"
	p, err := tracing.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer(p.TracerProvider, "test").Start(context.Background(), "exported")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		for _, s := range col.Spans() {
			if s.Name == "exported" && s.Service == "shardlimit-router" && s.TraceID == span.SpanContext().TraceID().String() {
				return nil
			}
		}
		return fmt.Errorf("span not received: %+v", col.Spans())
	})
}

// The trace context of a sampled span goes into a map and back; an
// unsampled one does not travel.
func TestInjectExtract(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p, err := tracing.NewProvider(tracing.DefaultOptions(), exp)
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tracing.Tracer(p.TracerProvider, "test").Start(context.Background(), "batch")
	defer span.End()
	m := tracing.Inject(ctx)
	if m["traceparent"] == "" {
		t.Fatalf("no traceparent in %v", m)
	}
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), m))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsRemote() || !got.IsSampled() {
		t.Errorf("extracted %+v, want the span's context %+v, remote", got, span.SpanContext())
	}
	if m := tracing.Inject(context.Background()); m != nil {
		t.Errorf("no span injected %v", m)
	}
	off, err := tracing.NewProvider(tracing.Options{SampleRatio: 0}, exp)
	if err != nil {
		t.Fatal(err)
	}
	ctx, unsampled := tracing.Tracer(off.TracerProvider, "test").Start(context.Background(), "root")
	defer unsampled.End()
	if m := tracing.Inject(ctx); m != nil {
		t.Errorf("an unsampled span travels: %v", m)
	}
}
