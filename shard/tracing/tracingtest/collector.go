package tracingtest

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"net"
	"sync"
	"testing"

	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/shardlimit/shardlimit/shard/creds"
)

// Span is one received span, with the service that sent it.
type Span struct {
	Service, Name                 string
	TraceID, SpanID, ParentSpanID string   // hex; ParentSpanID "" for a root
	Links                         []string // span ids, hex
}

// Collector is a running OTLP/gRPC trace collector.
type Collector struct {
	collectortracev1.UnimplementedTraceServiceServer
	// Addr is where it listens, host:port.
	Addr string

	discard bool // count spans, keep none (benchmarks)

	mu    sync.Mutex
	spans []Span
	count int
}

// Serve starts a collector that stops with the test; cfg nil serves in
// plain text.
func Serve(tb testing.TB, cfg *tls.Config) *Collector { return serve(tb, cfg, false) }

// ServeMutualTLS starts a collector that requires a client certificate of
// a PKI it makes in a temporary directory, and returns the PKI: exporters
// verify the collector with its CA and present one of its certificates.
func ServeMutualTLS(tb testing.TB) (*Collector, *creds.Local) {
	tb.Helper()
	pki, err := creds.NewLocal(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	files, err := pki.Issue("collector", "spiffe://shardlimit/collector")
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := creds.ServerTLS(files, tls.RequireAndVerifyClientCert)
	if err != nil {
		tb.Fatal(err)
	}
	return Serve(tb, cfg), pki
}

// ServeDiscard starts a collector that counts the spans it receives and
// keeps none, for benchmarks.
func ServeDiscard(tb testing.TB, cfg *tls.Config) *Collector { return serve(tb, cfg, true) }

func serve(tb testing.TB, cfg *tls.Config, discard bool) *Collector {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var opts []grpc.ServerOption
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	srv := grpc.NewServer(opts...)
	c := &Collector{Addr: lis.Addr().String(), discard: discard}
	collectortracev1.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(lis) }()
	tb.Cleanup(srv.Stop)
	return c
}

// Export implements the OTLP trace service.
func (c *Collector) Export(_ context.Context, req *collectortracev1.ExportTraceServiceRequest) (*collectortracev1.ExportTraceServiceResponse, error) {
	if c.discard {
		n := 0
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
		c.mu.Lock()
		c.count += n
		c.mu.Unlock()
		return &collectortracev1.ExportTraceServiceResponse{}, nil
	}
	var got []Span
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Service: service, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId)}
				if len(s.ParentSpanId) > 0 {
					sp.ParentSpanID = hex.EncodeToString(s.ParentSpanId)
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, hex.EncodeToString(l.SpanId))
				}
				got = append(got, sp)
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.count += len(got)
	c.mu.Unlock()
	return &collectortracev1.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Count returns the number of spans received so far.
func (c *Collector) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}
