package client

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		mutate func(*Options)
		want   string
	}{
		{func(o *Options) { o.Routers = nil }, "routers: at least one"},
		{func(o *Options) { o.Routers = []string{"a:1", ""} }, "routers[1]: empty"},
		{func(o *Options) { o.Timeout = time.Microsecond }, "timeout: 1µs not in 1ms..1m"},
		{func(o *Options) { o.FailureMode = 7 }, "failure mode: FailureMode(7)"},
		{func(o *Options) { o.BatchWindow = time.Second }, "batch window: 1s not in 0..timeout (50ms)"},
		{func(o *Options) { o.MaxBatch = -1 }, "max batch: -1 not in 1..100000"},
		{func(o *Options) { o.MaxAttempts = 11 }, "max attempts: 11 not in 1..10"},
		{func(o *Options) { o.BackoffBase = time.Second }, "backoff base: 1s not in 0..backoff max (20ms)"},
		{func(o *Options) { o.BackoffBase, o.BackoffMax = time.Second, time.Minute }, "backoff max: 1m0s is over"},
	} {
		o := Options{Routers: []string{"127.0.0.1:1"}}
		c.mutate(&o)
		_, err := New(o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want an error containing %q", err, c.want)
		}
	}
	o := Options{Routers: []string{"127.0.0.1:1"}}
	o.fill()
	if err := o.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if o.Timeout != 50*time.Millisecond || o.MaxBatch != 100 || o.MaxAttempts != 3 || o.FailureMode != FailOpen || o.BatchWindow != 0 {
		t.Fatalf("defaults: %+v", o)
	}
}

func TestParseFailureMode(t *testing.T) {
	for s, want := range map[string]FailureMode{"open": FailOpen, "closed": FailClosed} {
		if got, err := ParseFailureMode(s); err != nil || got != want || got.String() != s {
			t.Errorf("%q: %v %v", s, got, err)
		}
	}
	if _, err := ParseFailureMode("maybe"); err == nil {
		t.Error("maybe: no error")
	}
}
