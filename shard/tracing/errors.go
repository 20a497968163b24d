package tracing

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrorWindow is how often the same OpenTelemetry error is logged at most:
// a collector that is down makes one WARN line a minute per distinct
// error, not one per failed export.
const ErrorWindow = time.Minute

// maxDistinct bounds the errors remembered in a window; past it, new
// errors share one entry (and one line a window).
const maxDistinct = 64

// overflow is the entry of the errors past maxDistinct.
const overflow = "\x00other errors"

// errorLog is OpenTelemetry's error handler (otel.SetErrorHandler): the
// exporter's errors (and otelgrpc's) go to the structured log as WARN
// "tracing error", each distinct one at most once per ErrorWindow.
type errorLog struct {
	log   *slog.Logger
	now   func() time.Time
	quiet atomic.Bool // set when Shutdown drops the spans: the errors that follow are its own doing

	mu sync.Mutex
	r  repeats
}

func newErrorLog(log *slog.Logger) *errorLog {
	return &errorLog{log: log, now: time.Now, r: repeats{window: ErrorWindow}}
}

// Handle logs err unless the same error was logged less than ErrorWindow
// ago; the line says how many were left out since the previous one.
func (e *errorLog) Handle(err error) {
	if err == nil || e.quiet.Load() {
		return
	}
	e.mu.Lock()
	ok, left := e.r.note(err.Error(), e.now())
	e.mu.Unlock()
	if ok {
		e.log.Warn("tracing error", "err", err, "repeats_not_logged", left, "window", ErrorWindow)
	}
}

// repeats decides which errors of a stream are logged: the first of each
// distinct message, then at most one per window, carrying the count of
// those left out since the previous line. Time is passed in.
type repeats struct {
	window time.Duration
	seen   map[string]*repeat
}

type repeat struct {
	logged time.Time // when the last line for this message was written
	left   int       // occurrences not logged since
}

// note records one occurrence of msg at now and says whether to log it,
// and how many occurrences since the previous line were not logged.
func (r *repeats) note(msg string, now time.Time) (log bool, left int) {
	if r.seen == nil {
		r.seen = make(map[string]*repeat)
	}
	e, ok := r.seen[msg]
	if !ok && len(r.seen) >= maxDistinct {
		r.forget(now)
		if len(r.seen) >= maxDistinct {
			msg = overflow
			e, ok = r.seen[msg]
		}
	}
	if !ok {
		r.seen[msg] = &repeat{logged: now}
		return true, 0
	}
	if now.Sub(e.logged) < r.window {
		e.left++
		return false, 0
	}
	left, e.logged, e.left = e.left, now, 0
	return true, left
}

// forget drops the messages last logged a window or more before now: their
// next occurrence is logged anyway (their count left out is lost).
func (r *repeats) forget(now time.Time) {
	for msg, e := range r.seen {
		if now.Sub(e.logged) >= r.window {
			delete(r.seen, msg)
		}
	}
}
