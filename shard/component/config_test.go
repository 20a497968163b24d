package component

import (
	"crypto/tls"
	"strings"
	"testing"
)

// Fill gives every zero field its default, and Validate names the first
// field out of bounds.
func TestFillAndValidate(t *testing.T) {
	var c Config
	c.Fill()
	if c.Prefix != DefaultPrefix || c.Logger == nil || c.Registry == nil || c.Limits.MaxConnections == 0 {
		t.Fatalf("filled: %+v", c)
	}
	for _, tc := range []struct {
		adjust func(*Config)
		want   string
	}{
		{func(c *Config) { c.Etcd = nil }, "etcd: at least one endpoint is required"},
		{func(c *Config) { c.TLS = nil }, "tls: required"},
		{func(c *Config) { c.Limits.MaxConnections = -1 }, "max-connections"},
		{func(c *Config) { c.TLS, c.Insecure = nil, true }, ""},
	} {
		c := DefaultConfig()
		c.Etcd, c.TLS = []string{"127.0.0.1:2379"}, &tls.Config{}
		tc.adjust(&c)
		c.Fill()
		err := c.Validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
