package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardlimit/shardlimit/shard/logtest"
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

// closedPort returns an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startLost starts tracing to the collector at endpoint, in plain text
// with its log in a buffer, and ends n spans.
func startLost(t *testing.T, endpoint string, n int) (*tracing.Provider, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	o := tracing.DefaultOptions()
	o.Endpoint, o.Insecure = endpoint, true
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	p, err := tracing.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		_, span := tracing.Tracer(p.TracerProvider, "test").Start(context.Background(), "lost")
		span.End()
	}
	return p, logs
}

// shutdownWithin runs p.Shutdown with a generous hang guard: it must
// return, however loaded the machine.
func shutdownWithin(t *testing.T, p *tracing.Provider) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Shutdown hangs with the collector absent (bound %v)", tracing.ShutdownTimeout)
		return nil
	}
}

// With no collector, Shutdown returns within its bound, not after the
// exporter's minute of retries, and says in the log how many spans it
// dropped.
func TestShutdownWithoutCollector(t *testing.T) {
	p, logs := startLost(t, closedPort(t), 3)
	_ = shutdownWithin(t, p)
	out := logs.String()
	if !strings.Contains(out, `level=WARN msg="tracing stopped: spans not exported were dropped" exported=0 dropped=3`) {
		t.Errorf("no WARN line counting the 3 dropped spans in:\n%s", out)
	}
}

// A collector that was unreachable at the last connection attempt is not
// waited for at all: Shutdown drops the buffered spans and names the
// failure.
func TestShutdownCollectorKnownDown(t *testing.T) {
	p, logs := startLost(t, closedPort(t), 1)
	// A flush makes the exporter connect, and fail.
	ctx, cancel := context.WithCancel(context.Background())
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		_ = p.TracerProvider.(interface{ ForceFlush(context.Context) error }).ForceFlush(ctx)
	}()
	poll.Until(t, 30*time.Second, func() error {
		if !tracing.CollectorDown(p) {
			return errors.New("no connection attempt failed yet")
		}
		return nil
	})
	cancel()
	<-flushed
	if err := shutdownWithin(t, p); err != nil {
		t.Errorf("Shutdown: %v, want nil: nothing to wait for", err)
	}
	out := logs.String()
	if !strings.Contains(out, `msg="tracing stopped: spans not exported were dropped" exported=0 dropped=1 collector=`) || !strings.Contains(out, "connection refused") {
		t.Errorf("no WARN line naming the unreachable collector in:\n%s", out)
	}
}

// A collector that accepts connections and never answers holds Shutdown
// no longer than its bound: the buffered spans are dropped and counted.
func TestShutdownCollectorSilent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() { // accept, read nothing, answer nothing
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	p, logs := startLost(t, l.Addr().String(), 1)
	if err := shutdownWithin(t, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: %v, want its bound's deadline", err)
	}
	if out := logs.String(); !strings.Contains(out, `msg="tracing stopped: spans not exported were dropped" exported=0 dropped=1 shutdown="context deadline exceeded"`) {
		t.Errorf("no WARN line counting the dropped span in:\n%s", out)
	}
}

// The exporter's errors go to the structured log, not to OpenTelemetry's
// default stderr logger, and the same error is logged once a window.
func TestExportErrorsLogged(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10") // ms: the batcher exports at once, not after 5s
	p, logs := startLost(t, closedPort(t), 1)
	defer shutdownWithin(t, p)
	poll.Until(t, 30*time.Second, func() error {
		// The error is "connection refused", or on a loaded machine the
		// export's own deadline passing first: either way a WARN line.
		if out := logs.String(); !strings.Contains(out, `level=WARN msg="tracing error" err="traces export:`) {
			return fmt.Errorf("the failed export is not in the structured log:\n%s", out)
		}
		return nil
	})
	for range 3 {
		otel.Handle(errors.New("the same error"))
	}
	if n := strings.Count(logs.String(), `err="the same error"`); n != 1 {
		t.Errorf("the same error logged %d times in a window, want once:\n%s", n, logs.String())
	}
}
