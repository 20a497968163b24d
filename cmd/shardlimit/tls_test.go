package main

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardlimit/shardlimit/shard/creds"
	"github.com/shardlimit/shardlimit/shard/metrictest"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// certNotAfter reads the notAfter of a PEM file's certificate (the
// earliest, for a bundle); creds' own tests check how.
func certNotAfter(t *testing.T, path string) float64 {
	t.Helper()
	_, notAfter, err := creds.LoadCAExpiry(path)
	if err != nil {
		t.Fatal(err)
	}
	return float64(notAfter.Unix())
}

// A component's registry exports the notAfter of every certificate its
// TLS flags loaded, by role, and follows a renewed --tls-cert.
func TestCertificateExpiryMetric(t *testing.T) {
	dir := t.TempDir()
	l, err := creds.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	etcdCA, err := creds.NewCA("etcd CA", 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := etcdCA.IssueFiles(t.TempDir(), "etcd-client", creds.Leaf{DNSNames: []string{"etcd"}, Validity: 10 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tf := tlsFlags{cert: l.Router.Cert, key: l.Router.Key, ca: l.Router.CA, serverName: creds.LocalServerName,
		etcdCert: etcd.Cert, etcdKey: etcd.Key, etcdCA: etcd.CA}
	server, _, _, err := tf.configs(tls.RequireAndVerifyClientCert)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := tf.registerExpiry(reg, "router"); err != nil {
		t.Fatal(err)
	}
	const name = "shardlimit_router_certificate_expiry_timestamp_seconds"
	want := map[string]float64{
		"server": certNotAfter(t, l.Router.Cert), "client": certNotAfter(t, l.Router.Cert), "ca": certNotAfter(t, l.Router.CA),
		"etcd_client": certNotAfter(t, etcd.Cert), "etcd_ca": certNotAfter(t, etcd.CA),
	}
	for cert, v := range want {
		if got := metrictest.Value(t, reg, name, map[string]string{"cert": cert}); got != v {
			t.Errorf("%s{cert=%q} = %v, want %v", name, cert, got, v)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || len(mfs[0].GetMetric()) != len(want) {
		t.Errorf("gathered %v, want one family of %d series", mfs, len(want))
	}

	// A renewed server certificate is exported once the server reads it.
	renewed, err := l.CA.IssueFiles(dir, "router", creds.Leaf{URIs: []string{creds.RouterID}, DNSNames: []string{creds.LocalServerName}, Validity: 3 * 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wantRenewed := certNotAfter(t, renewed.Cert)
	poll.Until(t, 10*time.Second, func() error {
		if _, err := server.GetConfigForClient(nil); err != nil { // a handshake: the files are looked at
			t.Fatal(err)
		}
		if got := metrictest.Value(t, reg, name, map[string]string{"cert": "server"}); got != wantRenewed {
			return fmt.Errorf("%s{cert=\"server\"} = %v, not the renewed certificate's %v", name, got, wantRenewed)
		}
		return nil
	})

	// --insecure: no certificate, no series; the family is still valid.
	var none tlsFlags
	reg = prometheus.NewRegistry()
	if err := none.registerExpiry(reg, "shard"); err != nil {
		t.Fatal(err)
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
		t.Errorf("insecure: gathered %v, %v; want nothing", mfs, err)
	}
	if err := none.registerExpiry(reg, "shard"); err == nil || !strings.Contains(err.Error(), "certificate expiry") {
		t.Errorf("registered twice: %v, want an error naming the metric", err)
	}
}
