package httpmw

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardlimit/shardlimit/router/client"
	"github.com/shardlimit/shardlimit/router/ratelimitheader"
)

// New returns middleware that checks every request with c before calling
// the wrapped handler. It panics if opts are invalid (a start-up mistake);
// the message names the field.
//
// Per request:
//   - key missing: per Options.MissingKey, 400 (default) or pass through;
//   - allowed: the handler is called, after the decision's Delay if any,
//     with the RateLimit fields set unless OmitHeadersWhenAllowed;
//   - denied (by a counter, a failure policy or the client's failure mode):
//     Retry-After and, when a counter decided, the RateLimit fields are
//     set, then Options.Denied answers: by default 429 with the draft's
//     quota-exceeded problem details (ProblemDenied);
//   - client.ErrInvalidCheck (e.g. a key over the routers' length bound):
//     400;
//   - the request's context canceled: 503, as the caller is gone;
//   - any other error (unknown service, closed client, credentials): the
//     client's failure mode: pass through when open, 503 with Retry-After
//     when closed; logged.
func New(c *client.Client, opts Options) func(http.Handler) http.Handler {
	opts.fill()
	if err := opts.validate(); err != nil {
		panic("httpmw: " + err.Error())
	}
	m := &middleware{c: c, o: opts}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}
}

type middleware struct {
	c       *client.Client
	o       Options
	lastLog atomic.Int64
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	chk := client.Check{Service: m.o.Service, Endpoint: m.o.Endpoint(r), Hits: m.o.Hits(r)}
	if chk.Endpoint == "" {
		chk.Endpoint = "/"
	}
	ip, ipOK := ClientIP(r, m.o.TrustedProxies, m.o.ForwardedHeader)
	if ipOK {
		chk.IP = ip.String()
	}
	missing := ""
	switch m.o.Key {
	case KeyUserHeader:
		if chk.User = strings.TrimSpace(r.Header.Get(m.o.Header)); chk.User == "" {
			missing = "missing " + m.o.Header + " header"
		}
	case KeyAPIKeyHeader:
		if chk.APIKey = strings.TrimSpace(r.Header.Get(m.o.Header)); chk.APIKey == "" {
			missing = "missing " + m.o.Header + " header"
		}
	case KeyClientIP:
		if !ipOK {
			missing = "client address unknown"
		}
	}
	if missing != "" {
		if m.o.MissingKey == MissingKeyAllow {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, missing+": required for rate limiting", http.StatusBadRequest)
		return
	}

	d, err := m.c.CheckOne(r.Context(), chk)
	if err != nil {
		m.fail(w, r, next, err)
		return
	}
	if !d.Allowed {
		setRateLimitFields(w.Header(), d)
		if s, ok := ratelimitheader.RetryAfter(d.RetryAfter); ok { // else the request costs more than the rule ever allows
			w.Header().Set(ratelimitheader.RetryAfterField, s)
		}
		m.o.Denied(w, r, d)
		return
	}
	if !m.o.OmitHeadersWhenAllowed {
		setRateLimitFields(w.Header(), d)
	}
	if d.Delay > 0 && !wait(r.Context(), d.Delay) {
		http.Error(w, "request canceled", http.StatusServiceUnavailable)
		return
	}
	next.ServeHTTP(w, r)
}

// fail answers a request whose check returned an error.
func (m *middleware) fail(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	switch {
	case errors.Is(err, client.ErrInvalidCheck):
		http.Error(w, "invalid rate limit key", http.StatusBadRequest)
		return
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		http.Error(w, "request canceled", http.StatusServiceUnavailable)
		return
	}
	m.log(err)
	if m.c.FailureMode() == client.FailOpen {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
}

// log logs at most one line a second.
func (m *middleware) log(err error) {
	now := time.Now().UnixNano()
	last := m.lastLog.Load()
	if now-last < int64(time.Second) || !m.lastLog.CompareAndSwap(last, now) {
		return
	}
	m.o.Logger.Error("rate limit check failed; following the client's failure mode",
		"service", m.o.Service, "failure_mode", m.c.FailureMode().String(), "err", err)
}

// wait waits d unless ctx ends first; it reports whether it waited d.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
