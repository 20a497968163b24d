package tracing

import (
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/http/httpproxy"
)

// ShutdownTimeout bounds Provider.Shutdown: the spans still buffered are
// exported within it or dropped (and counted in the log line). When the
// last connection attempt to a collector dialed directly failed, Shutdown
// does not wait at all.
const ShutdownTimeout = 2 * time.Second

// ExportTimeout bounds one export, its retries included; a collector that
// is down costs the spans of that export, counted when tracing stops.
const ExportTimeout = 5 * time.Second

// exportRetry is the exporter's retry of a failed export, within
// ExportTimeout (OpenTelemetry's default retries for a minute).
var exportRetry = otlptracegrpc.RetryConfig{
	Enabled:         true,
	InitialInterval: 250 * time.Millisecond,
	MaxInterval:     time.Second,
	MaxElapsedTime:  ExportTimeout,
}

// counted wraps the exporter behind the batcher and counts the spans that
// reached the collector; ended counts the sampled spans that ended, so
// ended - exported were dropped (failed exports, a full queue, a cut
// shutdown).
type counted struct {
	sdktrace.SpanExporter
	ended, exported atomic.Int64
	stopOnce        sync.Once
	stopped         chan struct{} // closed when the batcher has shut the exporter down
}

func newCounted(exp sdktrace.SpanExporter) *counted {
	return &counted{SpanExporter: exp, stopped: make(chan struct{})}
}

func (c *counted) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.exported.Add(int64(len(spans)))
	}
	return err
}

func (c *counted) Shutdown(ctx context.Context) error {
	defer c.stopOnce.Do(func() { close(c.stopped) })
	return c.SpanExporter.Shutdown(ctx)
}

// endCounter is the span processor that counts the sampled spans that end
// (the ones the batcher is given).
type endCounter struct{ c *counted }

func (e endCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (e endCounter) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanContext().IsSampled() {
		e.c.ended.Add(1)
	}
}
func (e endCounter) Shutdown(context.Context) error   { return nil }
func (e endCounter) ForceFlush(context.Context) error { return nil }

// dialer connects the exporter to the collector and remembers whether the
// last attempt failed: then Shutdown drops the buffered spans at once
// instead of retrying against a collector that is not there. It is used
// only when the collector is dialed directly (see direct).
type dialer struct {
	mu     sync.Mutex
	err    error  // of the last attempt; nil after a success
	onFail func() // called on a failure during Shutdown
}

func (d *dialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	d.mu.Lock()
	d.err = err
	f := d.onFail
	d.mu.Unlock()
	if err != nil && f != nil {
		f()
	}
	return conn, err
}

// direct says whether gRPC would dial endpoint (host:port) itself over
// TCP: not through an HTTPS_PROXY of the environment, and not a unix
// socket. A dialer of our own would bypass those, so they go without it
// (and Shutdown then waits its whole bound for an unreachable collector).
func direct(endpoint string) bool {
	if strings.HasPrefix(endpoint, "unix:") {
		return false
	}
	proxy, err := httpproxy.FromEnvironment().ProxyFunc()(&url.URL{Scheme: "https", Host: endpoint})
	return err == nil && proxy == nil
}

// last returns the failure of the last attempt, nil after a success.
func (d *dialer) last() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// whenDown returns the failure of the last attempt, if it failed; else
// it calls f at the next failure.
func (d *dialer) whenDown(f func()) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.onFail = f
	}
	return d.err
}

// Shutdown exports the spans still buffered and ends the exporter, within
// ShutdownTimeout (or ctx, if sooner), and at once when the collector is
// unreachable; then it logs the spans that were never exported. It does
// nothing when tracing is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ShutdownTimeout)
	defer cancel()
	var down error
	if p.dial != nil {
		if down = p.dial.whenDown(func() { go p.drop() }); down != nil {
			p.drop() // before the batcher flushes: it would retry until ctx ends
		}
	}
	err := p.sdk.Shutdown(ctx)
	if err != nil {
		// Cut short: drop what the batcher still holds instead of letting
		// it retry in the background, and wait for it to finish so that
		// the counts are final.
		p.drop()
		guard, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		_ = p.batcher.Shutdown(guard) // does nothing if the provider shut it down already
		select {
		case <-p.count.stopped:
		case <-guard.Done(): // hang guard: the counts are then a lower bound
		}
	}
	if down == nil && p.dial != nil {
		down = p.dial.last()
	}
	p.logStop(err, down)
	return err
}

// drop ends the exporter at once: the exports running are cancelled and
// the next ones fail, so the batcher drops the spans it holds. Their
// errors are not logged: logStop counts what was dropped.
func (p *Provider) drop() {
	if p.exp == nil {
		return
	}
	p.errs.quiet.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.exp.Shutdown(ctx)
}

// logStop writes what tracing dropped: WARN when spans were never
// exported, DEBUG otherwise.
func (p *Provider) logStop(err, down error) {
	ended, exported := p.count.ended.Load(), p.count.exported.Load()
	attrs := []any{"exported", exported, "dropped", ended - exported}
	if err != nil {
		attrs = append(attrs, "shutdown", err)
	}
	if down != nil {
		attrs = append(attrs, "collector", down)
	}
	if ended > exported {
		p.log.Warn("tracing stopped: spans not exported were dropped", attrs...)
		return
	}
	p.log.Debug("tracing stopped", attrs...)
}
