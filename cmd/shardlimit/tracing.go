package main

import (
	"context"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/shardlimit/shardlimit/shard/tracing"
)

// traceFlags are the OpenTelemetry flags of router, shard, rebalance and
// dev (which passes them to its components).
type traceFlags struct{ o tracing.Options }

func newTraceFlags() *traceFlags { return &traceFlags{o: tracing.DefaultOptions()} }

func (t *traceFlags) register(f *pflag.FlagSet) {
	f.StringVar(&t.o.Endpoint, "otlp-endpoint", "", "host:port of an OTLP/gRPC trace collector (OpenTelemetry Collector, Jaeger or Tempo, usually port 4317); traces each check with W3C trace context; a collector that is down costs spans (logged), not a slow stop (default: off, no spans made)")
	f.Float64Var(&t.o.SampleRatio, "trace-sample-ratio", t.o.SampleRatio, "share of the traces starting here that are recorded, 0..1; a caller's sampled or unsampled trace context is followed whatever the ratio")
	f.BoolVar(&t.o.Insecure, "otlp-insecure", false, "export spans in plain text (a collector on localhost or in the pod); default TLS, verified with --otlp-ca or the system's roots")
	f.StringVar(&t.o.CAFile, "otlp-ca", "", "PEM CA that verifies the collector's certificate (default: the system's roots)")
	f.StringVar(&t.o.CertFile, "otlp-cert", "", "PEM client certificate presented to the collector (mTLS; default: none)")
	f.StringVar(&t.o.KeyFile, "otlp-key", "", "PEM key of --otlp-cert")
}

// start starts the tracing of a component, named service (its
// service.name) and instance (its service.instance.id, "" for none).
func (t *traceFlags) start(ctx context.Context, service, instance string) (*tracing.Provider, error) {
	o := t.o
	o.Service, o.Version, o.Instance, o.Logger = service, build().Version, instance, logger()
	if err := o.Validate(); err != nil {
		return nil, usageErrorf("--%v", err)
	}
	return tracing.Start(ctx, o)
}

// args are the flags that give a child component the same tracing.
func (t *traceFlags) args() []string {
	if t.o.Endpoint == "" {
		return nil
	}
	out := []string{"--otlp-endpoint", t.o.Endpoint, "--trace-sample-ratio", strconv.FormatFloat(t.o.SampleRatio, 'g', -1, 64)}
	if t.o.Insecure {
		out = append(out, "--otlp-insecure")
	}
	for _, f := range []struct{ name, v string }{{"--otlp-ca", t.o.CAFile}, {"--otlp-cert", t.o.CertFile}, {"--otlp-key", t.o.KeyFile}} {
		if f.v != "" {
			out = append(out, f.name, f.v)
		}
	}
	return out
}
