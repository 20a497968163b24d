package client

import (
	"log/slog"
	"strings"
)

// String shows the decision as key=value pairs, its zero fields left out:
//
//	allowed=false rule=checkout limit=10 window=1m0s reset_after=1m0s retry_after=never
//
// A denial that no wait lifts (NeverAllowed) shows retry_after=never, not
// RetryNever's 2562047h47m16s.
func (d Decision) String() string { return text(d.attrs()) }

// LogValue is the decision in a structured log (slog): its String's
// fields as attributes, retry_after the string "never" when NeverAllowed.
func (d Decision) LogValue() slog.Value { return slog.GroupValue(d.attrs()...) }

// String shows the quota as key=value pairs, as Decision's String does.
func (q Quota) String() string { return text(q.attrs()) }

// LogValue is the quota in a structured log, as Decision's LogValue.
func (q Quota) LogValue() slog.Value { return slog.GroupValue(q.attrs()...) }

func (d Decision) attrs() []slog.Attr {
	a := d.quota().attrs()
	a = appendIf(a, d.Overload, slog.Bool("overload", true))
	a = appendIf(a, d.Delay != 0, slog.Duration("delay", d.Delay))
	a = appendIf(a, d.SoftAllowanceUsed, slog.Bool("soft_allowance_used", true))
	a = appendIf(a, d.FromFailureMode, slog.Bool("from_failure_mode", true))
	if len(d.Quotas) > 0 {
		qs := make([]slog.Attr, len(d.Quotas))
		for i, q := range d.Quotas {
			qs[i] = slog.Attr{Key: q.Rule, Value: q.LogValue()}
		}
		a = append(a, slog.Attr{Key: "quotas", Value: slog.GroupValue(qs...)})
	}
	return a
}

func (q Quota) attrs() []slog.Attr {
	a := []slog.Attr{slog.Bool("allowed", q.Allowed)}
	a = appendIf(a, q.Rule != "", slog.String("rule", q.Rule))
	a = appendIf(a, q.Limit != 0, slog.Int64("limit", q.Limit))
	a = appendIf(a, q.Window != 0, slog.Duration("window", q.Window))
	a = appendIf(a, q.Remaining != 0, slog.Int64("remaining", q.Remaining))
	a = appendIf(a, q.ResetAfter != 0, slog.Duration("reset_after", q.ResetAfter))
	switch {
	case q.NeverAllowed:
		a = append(a, slog.String("retry_after", "never"))
	case q.RetryAfter != 0:
		a = append(a, slog.Duration("retry_after", q.RetryAfter))
	}
	a = appendIf(a, q.NextAfter != 0, slog.Duration("next_after", q.NextAfter))
	a = appendIf(a, q.FailurePolicy, slog.Bool("failure_policy", true))
	a = appendIf(a, q.Shadow, slog.Bool("shadow", true))
	a = appendIf(a, q.ShadowDenied, slog.Bool("shadow_denied", true))
	return a
}

func appendIf(a []slog.Attr, ok bool, attr slog.Attr) []slog.Attr {
	if ok {
		return append(a, attr)
	}
	return a
}

// text writes attrs as key=value separated by spaces, a group's
// attributes in brackets.
func text(attrs []slog.Attr) string {
	s := make([]string, len(attrs))
	for i, a := range attrs {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}
