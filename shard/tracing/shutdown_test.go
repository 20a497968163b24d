package tracing

import "testing"

// The exporter dials the collector itself only where gRPC would: not
// through a proxy of the environment, not to a unix socket.
func TestDirect(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
	t.Setenv("NO_PROXY", "otel.internal")
	for endpoint, want := range map[string]bool{
		"127.0.0.1:4317":          true, // loopback is never proxied
		"localhost:4317":          true,
		"otel.internal:4317":      true, // NO_PROXY
		"collector.example:4317":  false,
		"unix:/run/otel.sock":     false,
		"unix:///run/otel.sock":   false,
		"api.honeycomb.io:443":    false,
		"otel.internal.corp:4317": false,
	} {
		if got := direct(endpoint); got != want {
			t.Errorf("direct(%q) = %v, want %v", endpoint, got, want)
		}
	}
}
