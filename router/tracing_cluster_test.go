package router_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance"
	"github.com/shardlimit/shardlimit/router"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/router/rules"
	"github.com/shardlimit/shardlimit/shard"
	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/poll"
	"github.com/shardlimit/shardlimit/shard/tracing"
)

// traced is a component's tracing into memory.
type traced struct {
	exp *tracetest.InMemoryExporter
	tp  trace.TracerProvider
}

func newTraced(t *testing.T, service string) traced {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	o := tracing.DefaultOptions()
	o.Service = service
	p, err := tracing.NewProvider(o, exp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return traced{exp: exp, tp: p.TracerProvider}
}

// byName returns the spans named name.
func (tr traced) byName(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range tr.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// tracedCluster starts a secure cluster whose router and shards trace
// into memory, and a caller that traces too, with the operator's
// certificate.
func tracedCluster(t *testing.T, shards int, tweak func(*router.Options)) (c *clustertest.Cluster, caller, rt, sh traced, client shardlimitv1.RateLimiterClient) {
	c, caller, rt, sh, conn := tracedClusterConn(t, shards, testRules(t), tweak)
	return c, caller, rt, sh, shardlimitv1.NewRateLimiterClient(conn)
}

func tracedClusterConn(t *testing.T, shards int, rs []rules.Rule, tweak func(*router.Options)) (c *clustertest.Cluster, caller, rt, sh traced, conn *grpc.ClientConn) {
	caller, rt, sh = newTraced(t, "caller"), newTraced(t, "shardlimit-router"), newTraced(t, "shardlimit-shard")
	c = clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: shards, Rules: rs,
		Shard: func(o *shard.Options) { o.Tracer = sh.tp },
		Router: func(o *router.Options) {
			o.Tracer = rt.tp
			if tweak != nil {
				tweak(o)
			}
		},
	})
	var err error
	conn, err = grpc.NewClient(c.Routers[0].Addr(), append([]grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(c.TLS(creds.OperatorID)))}, tracing.DialOptions(caller.tp)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return c, caller, rt, sh, conn
}

// A traced check, over mTLS, is one trace from the caller to the shard:
// the router's server span joins the caller's trace and carries the
// request's figures; its child waits for the shard; the call to the shard
// is the wait's child; and the shard's span for the batch is the call's
// child, its context carried in the batch.
func TestTracingOneCheckIsOneTrace(t *testing.T) {
	_, caller, rt, sh, client := tracedCluster(t, 1, nil)
	ctx, root := caller.tp.Tracer("test").Start(context.Background(), "caller")
	resp, err := client.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "alice"}}})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; !d.Allowed || d.FailurePolicy {
		t.Fatalf("decision %+v, want allowed by the shard", d)
	}
	traceID := root.SpanContext().TraceID()

	var server, wait, batch, shardSpan tracetest.SpanStub
	poll.Until(t, 10*time.Second, func() error {
		for _, s := range rt.byName("shardlimit.v1.RateLimiter/Check") {
			if s.SpanContext.TraceID() == traceID {
				server = s
			}
		}
		for _, s := range rt.byName("shardlimit.router/wait") {
			if s.SpanContext.TraceID() == traceID && attr(s, "shardlimit.checks").AsInt64() > 0 {
				wait = s
			}
		}
		for _, s := range rt.byName("shardlimit.router/batch") {
			if s.SpanContext.TraceID() == traceID {
				batch = s
			}
		}
		for _, s := range sh.byName("shardlimit.shard/batch") {
			if s.SpanContext.TraceID() == traceID {
				shardSpan = s
			}
		}
		switch {
		case !server.SpanContext.IsValid():
			return fmt.Errorf("no router server span in the caller's trace")
		case !wait.SpanContext.IsValid():
			return fmt.Errorf("no wait span in the trace")
		case !batch.SpanContext.IsValid():
			return fmt.Errorf("no shard call span in the trace")
		case !shardSpan.SpanContext.IsValid():
			return fmt.Errorf("no shard span in the trace")
		}
		return nil
	})
	// The router's span is the child of the caller's client span, the
	// child of root.
	var clientSpan tracetest.SpanStub
	for _, s := range caller.exp.GetSpans() {
		if s.SpanContext.SpanID() == server.Parent.SpanID() {
			clientSpan = s
		}
	}
	if clientSpan.SpanKind != trace.SpanKindClient || clientSpan.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("router span's parent %v is not the caller's client span under its root %v", server.Parent.SpanID(), root.SpanContext().SpanID())
	}
	for key, want := range map[string]string{"shardlimit.service": "shop", "shardlimit.endpoint": "/checkout"} {
		if got := attr(server, key).AsString(); got != want {
			t.Errorf("router span %s = %q, want %q", key, got, want)
		}
	}
	if attr(server, "shardlimit.checks").AsInt64() != 1 || !attr(server, "shardlimit.allowed").AsBool() {
		t.Errorf("router span attributes %v, want 1 check, allowed", server.Attributes)
	}
	if wait.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("wait span's parent %v, want the router span %v", wait.Parent.SpanID(), server.SpanContext.SpanID())
	}
	if got := attr(wait, "shardlimit.outcome").AsString(); got != "decided" {
		t.Errorf("wait outcome %q, want decided", got)
	}
	if batch.Parent.SpanID() != wait.SpanContext.SpanID() || batch.SpanKind != trace.SpanKindClient {
		t.Errorf("shard call span: parent %v kind %v, want the wait span %v, client", batch.Parent.SpanID(), batch.SpanKind, wait.SpanContext.SpanID())
	}
	if shardSpan.Parent.SpanID() != batch.SpanContext.SpanID() || !shardSpan.Parent.IsRemote() {
		t.Errorf("shard span's parent %v (remote %t), want the router's call span %v", shardSpan.Parent.SpanID(), shardSpan.Parent.IsRemote(), batch.SpanContext.SpanID())
	}
	if got := attr(shardSpan, "shardlimit.checks").AsInt64(); got != 1 {
		t.Errorf("shard span checks = %d, want 1", got)
	}
}

// Calls to a shard carry the checks of many requests: every call span
// belongs to one of them and links to the others, each of which links back,
// so every request's trace leads to the call that decided it, and the
// shard's span joins the call's trace.
func TestTracingCoalescedChecksLink(t *testing.T) {
	_, caller, rt, sh, client := tracedCluster(t, 1, func(o *router.Options) {
		o.CallsPerShard = 1
		o.MaxQueueWait = 10 * time.Second // decided by the shard, not shed, however loaded the machine
	})
	const n = 40
	roots := make([]trace.SpanContext, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, root := caller.tp.Tracer("test").Start(context.Background(), "caller")
			defer root.End()
			roots[i] = root.SpanContext()
			if _, err := client.Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: fmt.Sprint("u", i)}}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var waits, batches, shardSpans tracetest.SpanStubs
	poll.Until(t, 10*time.Second, func() error {
		waits, batches, shardSpans = rt.byName("shardlimit.router/wait"), rt.byName("shardlimit.router/batch"), sh.byName("shardlimit.shard/batch")
		if len(waits) < n || len(shardSpans) < len(batches) {
			return fmt.Errorf("%d wait spans for %d checks, %d shard spans for %d calls", len(waits), n, len(shardSpans), len(batches))
		}
		return nil
	})
	// Each wait span is carried by exactly one call: as its parent, or
	// linked both ways.
	carried := map[trace.SpanID]int{}
	batchOf := map[trace.SpanID]tracetest.SpanStub{}
	for _, b := range batches {
		batchOf[b.SpanContext.SpanID()] = b
		carried[b.Parent.SpanID()]++
		for _, l := range b.Links {
			carried[l.SpanContext.SpanID()]++
		}
		if got, want := attr(b, "shardlimit.requests").AsInt64(), int64(1+len(b.Links)); got != want {
			t.Errorf("call span carries %d requests and links to %d others", got, len(b.Links))
		}
	}
	for _, w := range waits {
		if attr(w, "shardlimit.outcome").AsString() != "decided" {
			continue // shed before any call (a loaded machine)
		}
		if got := carried[w.SpanContext.SpanID()]; got != 1 {
			t.Errorf("wait span %v (%v) is carried by %d calls, want 1", w.SpanContext.SpanID(), w.Attributes, got)
		}
		for _, l := range w.Links {
			b, ok := batchOf[l.SpanContext.SpanID()]
			if !ok || b.SpanContext.TraceID() == w.SpanContext.TraceID() {
				t.Errorf("wait span links to %v, not to a call span of another trace", l.SpanContext.SpanID())
			}
		}
	}
	// Every call's shard span is in the call's trace.
	parents := map[trace.SpanID]bool{}
	for _, s := range shardSpans {
		parents[s.Parent.SpanID()] = true
	}
	for _, b := range batches {
		if !parents[b.SpanContext.SpanID()] {
			t.Errorf("no shard span for call span %v", b.SpanContext.SpanID())
		}
	}
	t.Logf("%d checks went in %d calls", n, len(batches))
}

// With tracing off (no Tracer: no stats handler, no tracer), a router
// served a caller's trace context decides as ever; it has nowhere to make
// a span.
func TestTracingOffIgnoresTheCallersContext(t *testing.T) {
	caller := newTraced(t, "caller")
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1, Rules: testRules(t)})
	conn, err := grpc.NewClient(c.Routers[0].Addr(), append([]grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(c.TLS(creds.OperatorID)))}, tracing.DialOptions(caller.tp)...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, root := caller.tp.Tracer("test").Start(context.Background(), "caller")
	defer root.End()
	resp, err := shardlimitv1.NewRateLimiterClient(conn).Check(ctx, &shardlimitv1.CheckRequest{Checks: []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Decisions[0]; !d.Allowed || d.FailurePolicy {
		t.Fatalf("decision %+v, want allowed by the shard", d)
	}
}

// Envoy's ShouldRateLimit is traced as a check is: the router's span
// carries the domain, the descriptors and the overall code, and the wait
// for the shard is its child, in the caller's trace.
func TestTracingEnvoyCall(t *testing.T) {
	rs, err := rules.Parse("envoy.yaml", []byte(`
rules:
  - service: edge
    name: ip
    descriptor: [{key: remote_address}]
    limit: 100
    period: 1m
`))
	if err != nil {
		t.Fatal(err)
	}
	_, caller, rt, _, conn := tracedClusterConn(t, 1, rs, nil)
	ctx, root := caller.tp.Tracer("test").Start(context.Background(), "envoy")
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}})
	root.End()
	if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit: %v %v", resp, err)
	}
	var server, wait tracetest.SpanStub
	poll.Until(t, 10*time.Second, func() error {
		for _, s := range rt.exp.GetSpans() {
			switch {
			case s.SpanContext.TraceID() != root.SpanContext().TraceID():
			case s.Name == "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit":
				server = s
			case s.Name == "shardlimit.router/wait":
				wait = s
			}
		}
		if !server.SpanContext.IsValid() || !wait.SpanContext.IsValid() {
			return fmt.Errorf("no router span or wait span in the caller's trace")
		}
		return nil
	})
	if attr(server, "shardlimit.domain").AsString() != "edge" || attr(server, "shardlimit.descriptors").AsInt64() != 1 || attr(server, "shardlimit.overall_code").AsString() != "OK" {
		t.Errorf("router span attributes %v, want domain edge, 1 descriptor, OK", server.Attributes)
	}
	if wait.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("wait span's parent %v, want the router span %v", wait.Parent.SpanID(), server.SpanContext.SpanID())
	}
}

// A rebalance run asked for through a router's admin API is one trace: the
// router forwards the call to the leader, whose run is a span under the
// call's, and the run's calls to shards (their load) are its children.
func TestTracingRebalanceRun(t *testing.T) {
	rt, rb := newTraced(t, "shardlimit-router"), newTraced(t, "shardlimit-rebalance")
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 2, Rules: testRules(t),
		Router:    func(o *router.Options) { o.Tracer = rt.tp },
		Rebalance: func(o *rebalance.Options) { o.Tracer = rb.tp },
	})
	j := c.StartRebalance()
	poll.Until(t, 10*time.Second, func() error {
		if !j.Leading() {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	if _, err := c.Admin(0).RebalanceRun(context.Background(), &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		spans := rb.exp.GetSpans()
		for _, run := range spans {
			if run.Name != "shardlimit.rebalance/run" || attr(run, "shardlimit.trigger").AsString() != "test" {
				continue
			}
			server := false
			for _, s := range spans {
				server = server || (s.Name == "shardlimit.v1.Rebalancer/Run" && s.SpanContext.SpanID() == run.Parent.SpanID())
			}
			forwarded := false
			for _, s := range rt.exp.GetSpans() {
				forwarded = forwarded || (s.Name == "shardlimit.v1.Rebalancer/Run" && s.SpanKind == trace.SpanKindClient && s.SpanContext.TraceID() == run.SpanContext.TraceID())
			}
			stats := 0
			for _, s := range spans {
				if s.Name == "shardlimit.v1.Shard/Stats" && s.Parent.SpanID() == run.SpanContext.SpanID() {
					stats++
				}
			}
			if server && forwarded && stats == 2 {
				return nil
			}
			return fmt.Errorf("run span: under the leader's server span %t, in the router's trace %t, %d Stats calls under it, want 2", server, forwarded, stats)
		}
		return fmt.Errorf("no run span")
	})
}

// A check over the HTTP/JSON API is traced as over gRPC: the router's HTTP
// server span continues the caller's traceparent, and the wait for the
// shard is its child.
func TestTracingHTTPCheck(t *testing.T) {
	c, caller, rt, _, _ := tracedCluster(t, 1, func(o *router.Options) { o.HTTPListen = "127.0.0.1:0" })
	ctx, root := caller.tp.Tracer("test").Start(context.Background(), "http caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+c.Routers[0].HTTPAddr()+"/v1/check",
		strings.NewReader(`{"checks":[{"service":"shop","endpoint":"/checkout","user":"http-alice"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c.TLS(creds.OperatorID)}}
	resp, err := hc.Do(req)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"allowed":true`) {
		t.Fatalf("POST /v1/check: %d %s", resp.StatusCode, body)
	}
	var server, wait tracetest.SpanStub
	poll.Until(t, 10*time.Second, func() error {
		for _, s := range rt.exp.GetSpans() {
			switch {
			case s.SpanContext.TraceID() != root.SpanContext().TraceID():
			case s.Name == "POST /v1/check":
				server = s
			case s.Name == "shardlimit.router/wait":
				wait = s
			}
		}
		if !server.SpanContext.IsValid() || !wait.SpanContext.IsValid() {
			return fmt.Errorf("no HTTP server span or wait span in the caller's trace")
		}
		return nil
	})
	if server.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("HTTP span's parent %v, want the caller's %v", server.Parent.SpanID(), root.SpanContext().SpanID())
	}
	if wait.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("wait span's parent %v, want the HTTP span %v", wait.Parent.SpanID(), server.SpanContext.SpanID())
	}
}

// A CheckStream message that carries the caller's trace context is traced
// as a unary Check is: the router's span for the message joins the
// caller's trace, carries the request's figures, and is the parent of the
// wait for the shard; the stream itself has no span. A message without
// trace context makes no span.
func TestTracingCheckStreamMessage(t *testing.T) {
	_, caller, rt, _, client := tracedCluster(t, 1, nil)
	stream, err := client.CheckStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := caller.tp.Tracer("test").Start(context.Background(), "caller")
	checks := []*shardlimitv1.Check{{Service: "shop", Endpoint: "/checkout", User: "alice"}}
	for id, tc := range []map[string]string{tracing.Inject(ctx), nil} {
		if err := stream.Send(&shardlimitv1.CheckStreamRequest{Id: uint64(id), Checks: checks, TraceContext: tc}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Id != uint64(id) || resp.Code != 0 || len(resp.Decisions) != 1 || !resp.Decisions[0].Allowed {
			t.Fatalf("answer %v, want message %d's check allowed", resp, id)
		}
	}
	root.End()
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	traceID := root.SpanContext().TraceID()
	var msg, wait tracetest.SpanStub
	poll.Until(t, 10*time.Second, func() error {
		for _, s := range rt.byName("shardlimit.v1.RateLimiter/CheckStream.message") {
			if s.SpanContext.TraceID() == traceID {
				msg = s
			}
		}
		for _, s := range rt.byName("shardlimit.router/wait") {
			if s.SpanContext.TraceID() == traceID {
				wait = s
			}
		}
		if !msg.SpanContext.IsValid() || !wait.SpanContext.IsValid() {
			return fmt.Errorf("no message span, or no wait span, in the caller's trace")
		}
		return nil
	})
	if msg.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("the message's span is not the child of the caller's span")
	}
	if wait.Parent.SpanID() != msg.SpanContext.SpanID() {
		t.Errorf("the wait is not the child of the message's span")
	}
	if got := attr(msg, "shardlimit.checks").AsInt64(); got != 1 {
		t.Errorf("shardlimit.checks = %d, want 1", got)
	}
	if n := len(rt.byName("shardlimit.v1.RateLimiter/CheckStream.message")); n != 1 {
		t.Errorf("%d message spans, want 1: the untraced message makes none", n)
	}
	if n := len(rt.byName("shardlimit.v1.RateLimiter/CheckStream")); n != 0 {
		t.Errorf("%d spans for the stream itself, want none", n)
	}
}
