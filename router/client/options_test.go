package client

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/shard/creds"
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
		{func(o *Options) { o.TLS = nil }, "tls: required: set TLS (and Token), or SHARDLIMIT_CONFIG to a client config file, or Insecure"},
		{func(o *Options) { o.TLS, o.Token = nil, StaticToken }, "token: sent over TLS only"},
	} {
		t.Setenv("SHARDLIMIT_CONFIG", "")
		o := Options{Routers: []string{"127.0.0.1:1"}, TLS: &tls.Config{}}
		c.mutate(&o)
		_, err := New(o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want an error containing %q", err, c.want)
		}
	}
	o := Options{Routers: []string{"127.0.0.1:1"}, Insecure: true}
	o.fill()
	if err := o.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if o.Timeout != 50*time.Millisecond || o.MaxBatch != 100 || o.MaxAttempts != 3 || o.FailureMode != FailOpen || o.BatchWindow != 0 {
		t.Fatalf("defaults: %+v", o)
	}
}

// StaticToken is a token source for tests.
func StaticToken(context.Context) (string, error) { return "slt_test", nil }

// Without credentials, the client reads the router and its credentials
// from the client config file of $SHARDLIMIT_CONFIG, as dev writes it.
func TestCredentialsFromTheEnvironment(t *testing.T) {
	pki, err := creds.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(pki.Dir, "token")
	if err := os.WriteFile(tokenFile, []byte("slt_abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(pki.Dir, "client.yaml")
	cfg := creds.ClientConfig{Router: "127.0.0.1:1", TLSCA: pki.Operator.CA, TLSCert: pki.Operator.Cert, TLSKey: pki.Operator.Key, TLSServerName: "localhost", TokenFile: tokenFile}
	if err := cfg.Write(path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARDLIMIT_CONFIG", path)
	o := Options{}
	o.fill()
	if err := o.fromEnv(); err != nil {
		t.Fatal(err)
	}
	if o.TLS == nil || o.TLS.ServerName != "localhost" || o.TLS.GetClientCertificate == nil || len(o.Routers) != 1 || o.Routers[0] != "127.0.0.1:1" {
		t.Fatalf("from %s: %+v", path, o)
	}
	if tok, err := o.Token(context.Background()); err != nil || tok != "slt_abc" {
		t.Fatalf("token: %q %v", tok, err)
	}
	// Credentials given win; the environment is not read.
	t.Setenv("SHARDLIMIT_CONFIG", filepath.Join(pki.Dir, "missing.yaml"))
	given := Options{Routers: []string{"a:1"}, TLS: &tls.Config{ServerName: "given"}}
	if err := given.fromEnv(); err != nil || given.TLS.ServerName != "given" {
		t.Fatalf("given credentials: %v %+v", err, given.TLS)
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "SHARDLIMIT_CONFIG") {
		t.Fatalf("a missing config file: %v, want an error naming SHARDLIMIT_CONFIG", err)
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

// Metrics are off without a Registerer; a registry that holds a client's
// metrics already is refused, naming the option.
func TestRegisterer(t *testing.T) {
	pki := newPKI(t)
	reg := prometheus.NewRegistry()
	c := newClient(t, Options{TLS: pki.client, Routers: []string{"127.0.0.1:1"}, Registerer: reg})
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 4 {
		t.Fatalf("%d families registered, %v; want 4", len(mfs), err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "shardlimit_client_") {
			t.Errorf("metric %s is not named shardlimit_client_*", mf.GetName())
		}
	}
	if _, err := New(Options{TLS: pki.client, Routers: []string{"127.0.0.1:1"}, Registerer: reg}); err == nil || !strings.Contains(err.Error(), "registerer:") {
		t.Fatalf("second client on one registry: %v, want an error naming registerer", err)
	}
	off := newClient(t, Options{TLS: pki.client, Routers: []string{"127.0.0.1:1"}})
	if off.metrics.duration != nil || c.metrics.duration == nil {
		t.Fatal("metrics on without a Registerer, or off with one")
	}
}
