package envoy

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

func headerMap(hs []*corev3.HeaderValue) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		if _, dup := m[h.Key]; dup {
			panic("duplicate header " + h.Key)
		}
		m[h.Key] = h.Value
	}
	return m
}

func TestHeaders(t *testing.T) {
	checkout := limitState{name: "checkout", limit: 10, period: time.Minute, remaining: 4, nextAfter: 5500 * time.Millisecond}
	denied := checkout
	denied.remaining, denied.overLimit, denied.retryAfter = 0, true, 2100*time.Millisecond
	daily := limitState{name: "daily", limit: 1000, period: 24 * time.Hour, remaining: 990, nextAfter: 864 * time.Second}
	for _, tc := range []struct {
		name   string
		states []limitState
		want   map[string]string
	}{
		{"nothing", nil, map[string]string{}},
		{"one allowed", []limitState{checkout}, map[string]string{
			HeaderPolicy: `"checkout";q=10;w=60`, HeaderRateLimit: `"checkout";r=4;t=6`}},
		{"two policies, one over limit", []limitState{daily, denied}, map[string]string{
			HeaderPolicy:     `"daily";q=1000;w=86400, "checkout";q=10;w=60`,
			HeaderRateLimit:  `"daily";r=990;t=864, "checkout";r=0;t=3`,
			HeaderRetryAfter: "3"}},
		{"one rule twice: the most restrictive", []limitState{checkout, denied, checkout}, map[string]string{
			HeaderPolicy: `"checkout";q=10;w=60`, HeaderRateLimit: `"checkout";r=0;t=3`, HeaderRetryAfter: "3"}},
		{"shadow left out", []limitState{{name: "s", limit: 1, period: time.Second, shadow: true}}, map[string]string{}},
		{"failure policy deny: Retry-After only", []limitState{{name: "bank", limit: 5, period: time.Hour, byPolicy: true, overLimit: true, retryAfter: time.Second}}, map[string]string{
			HeaderRetryAfter: "1"}},
		{"failure policy allow: nothing", []limitState{{name: "bank", limit: 5, period: time.Hour, byPolicy: true}}, map[string]string{}},
		{"permanent denial: no Retry-After", []limitState{{name: "big", limit: 5, period: time.Hour, overLimit: true, retryAfter: 1<<63 - 1, nextAfter: 10 * time.Second}}, map[string]string{
			HeaderPolicy: `"big";q=5;w=3600`, HeaderRateLimit: `"big";r=0;t=10`}},
		{"name quoting", []limitState{{name: `a"b\c é`, limit: 1, period: time.Second}}, map[string]string{
			HeaderPolicy: `"a\"b\\c ??";q=1;w=1`, HeaderRateLimit: `"a\"b\\c ??";r=0;t=0`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := headerMap(headers(tc.states))
			if len(got) != len(tc.want) {
				t.Fatalf("headers %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
