package ratelimitheader

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFields(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Policy("checkout", 10, 60), `"checkout";q=10;w=60`},
		{Policy("checkout", 10, 0), `"checkout";q=10`},
		{Limit("checkout", 0, 6), `"checkout";r=0;t=6`},
		{Limit("x", -3, 1<<62), `"x";r=0;t=999999999999999`},
		{String(`a"b\c` + "\n\xff"), `"a\"b\\c??"`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

func TestListFields(t *testing.T) {
	policy, limit := Fields([]Quota{
		{Name: "burst", Quota: 10, Window: time.Second, Remaining: 0, Reset: 300 * time.Millisecond},
		{Name: "daily", Quota: 1000, Window: 24 * time.Hour, Remaining: 875, Reset: time.Hour},
		{Name: "no-window", Quota: 5},
	})
	if want := `"burst";q=10;w=1, "daily";q=1000;w=86400, "no-window";q=5`; policy != want {
		t.Errorf("policy = %s, want %s", policy, want)
	}
	if want := `"burst";r=0;t=1, "daily";r=875;t=3600, "no-window";r=0;t=0`; limit != want {
		t.Errorf("limit = %s, want %s", limit, want)
	}
	if p, l := Fields(nil); p != "" || l != "" {
		t.Errorf("no quotas: %q, %q", p, l)
	}
}

func TestReset(t *testing.T) {
	// Allowed: when more quota comes, not when the quota is whole.
	if got := Reset(true, 0, 6*time.Second); got != 6*time.Second {
		t.Errorf("allowed: %v", got)
	}
	// Denied: when the same request passes, as Retry-After says.
	if got := Reset(false, 60*time.Second, 6*time.Second); got != 60*time.Second {
		t.Errorf("denied: %v", got)
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second: 0, 0: 0, 1: 1, time.Second: 1, time.Second + 1: 2, 1 << 62: 4611686019,
	} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestProblem(t *testing.T) {
	rec := httptest.NewRecorder()
	QuotaExceeded(http.StatusTooManyRequests, "retry in <6> s", []string{"checkout", "daily"}).Write(rec)
	if !strings.Contains(rec.Body.String(), `"retry in <6> s"`) {
		t.Fatalf("body %s: the detail is escaped for HTML", rec.Body.String())
	}
	if rec.Code != 429 || rec.Header().Get("Content-Type") != ProblemContentType {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": ProblemType, "title": ProblemTitle, "status": float64(429), "detail": "retry in <6> s",
		"violated-policies": []any{"checkout", "daily"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %v, want %v", got, want)
	}
}

func TestAdvertised(t *testing.T) {
	counted := Answer{Rule: "checkout", Limit: 10, Window: time.Minute, Allowed: false, Remaining: 0, RetryAfter: 6 * time.Second, NextAfter: time.Second}
	got := Advertised([]Answer{
		counted,
		{Rule: "daily", Limit: 1000, Window: 24 * time.Hour, Allowed: true, Remaining: 875, NextAfter: time.Hour},
		{Rule: "down", Limit: 5, FailurePolicy: true},
		{Rule: "shadow", Limit: 5, Shadow: true},
		{Limit: 5},          // no rule
		{Rule: "unlimited"}, // no limit
	})
	want := []Quota{
		{Name: "checkout", Quota: 10, Window: time.Minute, Remaining: 0, Reset: 6 * time.Second},
		{Name: "daily", Quota: 1000, Window: 24 * time.Hour, Remaining: 875, Reset: time.Hour},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Advertised = %+v, want %+v", got, want)
	}
	h := http.Header{}
	SetFields(h, got)
	if h.Get(PolicyField) != `"checkout";q=10;w=60, "daily";q=1000;w=86400` || h.Get(LimitField) != `"checkout";r=0;t=6, "daily";r=875;t=3600` {
		t.Fatalf("fields %v", h)
	}
	h = http.Header{}
	SetFields(h, nil)
	if len(h) != 0 {
		t.Fatalf("no quotas: %v", h)
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", 5800 * time.Millisecond: "6", Never: "3153600000"} {
		if got, ok := RetryAfter(d); !ok || got != want {
			t.Errorf("RetryAfter(%v) = %q, %v; want %q", d, got, ok, want)
		}
	}
	if got, ok := RetryAfter(Never + 1); ok {
		t.Errorf("RetryAfter past Never = %q, want none", got)
	}
}
