package tracing

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Options configure a component's tracing. Flags of every component
// (--otlp-endpoint, --trace-sample-ratio, --otlp-insecure, --otlp-ca,
// --otlp-cert, --otlp-key) map 1:1 onto these fields.
type Options struct {
	// Endpoint is the host:port of an OTLP/gRPC trace collector (the
	// OpenTelemetry Collector, Jaeger or Tempo on port 4317); default "":
	// tracing off.
	Endpoint string
	// SampleRatio in [0, 1] is the share of the traces that start in this
	// component that are recorded. A call whose caller sent a sampled
	// trace context is recorded whatever the ratio, and an unsampled one
	// is not (parent-based). DefaultOptions sets 1, OpenTelemetry's own
	// default; the zero value records only what callers sampled.
	SampleRatio float64
	// Insecure exports in plain text; default false: TLS, verified with
	// CAFile or else the system's roots.
	Insecure bool
	// CAFile is a PEM file of the CAs that verify the collector; default
	// "": the system's roots.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key presented
	// to the collector (mTLS); default "": none. Both or neither.
	CertFile, KeyFile string
	// Service is the service.name of the spans (shardlimit-router, ...);
	// default "shardlimit".
	Service string
	// Version is the service.version of the spans; default "".
	Version string
	// Instance is the service.instance.id of the spans (a shard's id);
	// default "".
	Instance string
	// Logger receives OpenTelemetry's errors (each distinct one at most
	// once per ErrorWindow) and, at Shutdown, the count of spans dropped;
	// default slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the defaults: tracing off, and every trace
// recorded once an endpoint is set.
func DefaultOptions() Options { return Options{SampleRatio: 1, Service: "shardlimit"} }

// Errors of Options.Validate, with the flag that set the bad value.
var (
	ErrSampleRatio = errors.New("trace-sample-ratio: must be in 0..1")
	ErrCertPair    = errors.New("otlp-cert and otlp-key: give both or neither")
	ErrInsecureTLS = errors.New("otlp-insecure: cannot be combined with otlp-ca, otlp-cert or otlp-key")
)

// Validate reports the first bad field, named by its flag.
func (o *Options) Validate() error {
	switch {
	case !(o.SampleRatio >= 0 && o.SampleRatio <= 1): // NaN fails too
		return fmt.Errorf("%w, not %v", ErrSampleRatio, o.SampleRatio)
	case (o.CertFile == "") != (o.KeyFile == ""):
		return ErrCertPair
	case o.Insecure && (o.CAFile != "" || o.CertFile != ""):
		return ErrInsecureTLS
	}
	return nil
}

// Provider is a component's tracing: the provider its spans come from,
// and what flushes and ends it.
type Provider struct {
	// TracerProvider is nil when tracing is off; components take it as
	// their Options.Tracer.
	TracerProvider trace.TracerProvider
	sdk            *sdktrace.TracerProvider
	batcher        sdktrace.SpanProcessor // hands the spans to count
	count          *counted
	exp            sdktrace.SpanExporter // the OTLP exporter; nil with NewProvider
	dial           *dialer               // its connections; nil with NewProvider
	errs           *errorLog             // OpenTelemetry's error handler; nil with NewProvider
	log            *slog.Logger
}

// Start returns the tracing that o describes: off (a nil TracerProvider,
// no exporter) without an Endpoint. The exporter connects in the
// background: a collector that is down costs dropped spans, never a
// failed start. With an Endpoint, Start makes o.Logger OpenTelemetry's
// error handler (otel.SetErrorHandler, process-wide): its errors are WARN
// lines "tracing error", each distinct one at most once per ErrorWindow,
// instead of OpenTelemetry's default, a line on stderr per error.
func Start(ctx context.Context, o Options) (*Provider, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Endpoint == "" {
		return &Provider{}, nil
	}
	opts := []otlptracegrpc.Option{
		otlptracegrpc.WithEndpoint(o.Endpoint),
		otlptracegrpc.WithTimeout(ExportTimeout),
		otlptracegrpc.WithRetry(exportRetry),
	}
	var d *dialer
	if direct(o.Endpoint) {
		d = &dialer{}
		opts = append(opts, otlptracegrpc.WithDialOption(grpc.WithContextDialer(d.dial)))
	}
	if o.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	} else {
		cfg, err := o.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(cfg)))
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp-endpoint: %w", err)
	}
	errs := newErrorLog(cmp.Or(o.Logger, slog.Default()))
	otel.SetErrorHandler(errs)
	c := newCounted(exp)
	p := newProvider(o, sdktrace.NewBatchSpanProcessor(c, sdktrace.WithExportTimeout(ExportTimeout)), c)
	p.exp, p.dial, p.errs = exp, d, errs
	return p, nil
}

// NewProvider returns tracing that hands every span to exp as it ends
// (tests and benchmarks, with an in-memory exporter); Endpoint is ignored.
func NewProvider(o Options, exp sdktrace.SpanExporter) (*Provider, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := newCounted(exp)
	return newProvider(o, sdktrace.NewSimpleSpanProcessor(c), c), nil
}

// newProvider returns the provider whose spans go through batcher to c.
func newProvider(o Options, batcher sdktrace.SpanProcessor, c *counted) *Provider {
	service := o.Service
	if service == "" {
		service = DefaultOptions().Service
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	if o.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.Instance))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(endCounter{c}),
		sdktrace.WithSpanProcessor(batcher),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)))
	return &Provider{TracerProvider: tp, sdk: tp, batcher: batcher, count: c, log: cmp.Or(o.Logger, slog.Default())}
}

// tlsConfig is the exporter's TLS: CAFile's roots or the system's, and
// the client certificate when given.
func (o *Options) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("otlp-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("otlp-ca: no PEM certificate in %s", o.CAFile)
		}
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("otlp-cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
