// Package logwindow decides which lines of a repeating stream a component
// logs: the first of each kind, then at most one a window, carrying the
// count of those left out since the previous line. A line per event (a
// refused call, a failed trace export) would let a flood or an outage
// write the log; this writes one a window per kind, and bounds the kinds
// remembered. Authentication's refusals and the tracing errors log
// through it; time is passed in, so tests drive it with their own clock.
package logwindow
