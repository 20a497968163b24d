package shard

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"
)

// Bad options are refused with the field and the bound named.
func TestOptionsValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		adjust func(*Options)
		want   string
	}{
		{func(o *Options) { o.DrainTimeout = -time.Second }, "drain timeout: -1s not in 0..1h"},
		{func(o *Options) { o.DrainTimeout = 2 * time.Hour }, "drain timeout: 2h0m0s not in 0..1h"},
		{func(o *Options) { o.HandoffSettle = 2 * time.Minute }, "handoff settle: 2m0s not in 0..1m"},
		{func(o *Options) { o.TLS = &tls.Config{} }, "shard tls: required when tls is set"},
		{func(o *Options) { o.LeaseTTL = time.Millisecond }, "lease ttl: 1ms not in 1s..1h"},
		{func(o *Options) { o.TopKeysExact = -1 }, "top keys exact: -1 not in 1..1099511627776"},
	} {
		o := DefaultOptions()
		o.ID, o.Etcd = "s", []string{"127.0.0.1:2379"}
		tc.adjust(&o)
		o.fill()
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	o := DefaultOptions()
	o.ID, o.Etcd = "s", []string{"127.0.0.1:2379"}
	o.TLS, o.ShardTLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}, &tls.Config{}
	o.fill()
	if err := o.validate(); err != nil || o.DrainTimeout != 45*time.Second || o.HandoffSettle != 1500*time.Millisecond {
		t.Fatalf("defaults: %v, drain timeout %v, settle %v", err, o.DrainTimeout, o.HandoffSettle)
	}
}
