package tracing

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/shardlimit/shardlimit/shard/logwindow"
)

// ErrorWindow is how often the same OpenTelemetry error is logged at most:
// a collector that is down makes one WARN line a minute per distinct
// error, not one per failed export.
const ErrorWindow = time.Minute

// errorLog is OpenTelemetry's error handler (otel.SetErrorHandler): the
// exporter's errors (and otelgrpc's) go to the structured log as WARN
// "tracing error", each distinct one at most once per ErrorWindow
// (logwindow: past 64 distinct errors in a window, new ones share a line).
type errorLog struct {
	log   *slog.Logger
	now   func() time.Time
	quiet atomic.Bool // set when Shutdown drops the spans: the errors that follow are its own doing

	r logwindow.Repeats
}

func newErrorLog(log *slog.Logger) *errorLog {
	return &errorLog{log: log, now: time.Now, r: logwindow.Repeats{Window: ErrorWindow}}
}

// Handle logs err unless the same error was logged less than ErrorWindow
// ago; the line says how many were left out since the previous one.
func (e *errorLog) Handle(err error) {
	if err == nil || e.quiet.Load() {
		return
	}
	ok, left := e.r.Note(err.Error(), e.now())
	if ok {
		e.log.Warn("tracing error", "err", err, "repeats_not_logged", left, "window", ErrorWindow)
	}
}
