package creds

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/poll"
)

// notAfterOf reads the notAfter of the first certificate in a PEM file.
func notAfterOf(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.NotAfter
}

// loads records what OnLoad reported, in order.
type loads struct {
	mu   sync.Mutex
	last []Loaded
}

func (l *loads) onLoad(v Loaded) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = append(l.last, v)
}

func (l *loads) latest() (Loaded, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.last) == 0 {
		return Loaded{}, 0
	}
	return l.last[len(l.last)-1], len(l.last)
}

// ServerTLS and ClientTLS report the notAfter of the certificate and the
// earliest of the CA bundle when they load, and again when the files
// change; a file that does not parse reports nothing.
func TestOnLoadReportsExpiry(t *testing.T) {
	dir := t.TempDir()
	older, err := NewCA("older CA", 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := NewCA("newer CA", 96*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f, err := newer.IssueFiles(dir, "server", Leaf{DNSNames: []string{LocalServerName}, Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A bundle, as in a CA rotation: the newer CA first, the older after.
	if err := WriteFile(f.CA, append(newer.CertPEM(), older.CertPEM()...), 0o644); err != nil {
		t.Fatal(err)
	}
	wantCert, wantCA := notAfterOf(t, f.Cert), older.cert.NotAfter
	if !wantCA.Before(newer.cert.NotAfter) {
		t.Fatal("the test's CAs do not expire in the order it needs")
	}

	var server, client loads
	sf, cf := f, f
	sf.OnLoad, cf.OnLoad = server.onLoad, client.onLoad
	cfg, w, err := serverTLS(sf, tls.RequireAndVerifyClientCert)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ClientTLS(cf, LocalServerName); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*loads{"server": &server, "client": &client} {
		if got, n := l.latest(); n != 1 || !got.Cert.Equal(wantCert) || !got.CA.Equal(wantCA) {
			t.Errorf("%s: %d loads, last %+v; want 1 with cert %v, ca %v (the earlier of the bundle)", name, n, got, wantCert, wantCA)
		}
	}

	// A bad file is not reported; the renewed certificate is, once read.
	if err := WriteFile(f.Cert, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if _, err := cfg.GetConfigForClient(nil); err != nil {
			t.Fatal(err)
		}
		if w.Err() == nil {
			return errors.New("the bad certificate is not read yet")
		}
		return nil
	})
	if _, n := server.latest(); n != 1 {
		t.Fatalf("a certificate that does not parse was reported: %d loads", n)
	}
	if _, err := newer.IssueFiles(dir, "server", Leaf{DNSNames: []string{LocalServerName}, Validity: 72 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	renewed := notAfterOf(t, f.Cert)
	if !renewed.After(wantCert) {
		t.Fatalf("renewed certificate expires %v, not after %v", renewed, wantCert)
	}
	poll.Until(t, 10*time.Second, func() error {
		if _, err := cfg.GetConfigForClient(nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := server.latest(); !got.Cert.Equal(renewed) || !got.CA.Equal(wantCA) {
			return fmt.Errorf("last load %+v, want cert %v, ca %v", got, renewed, wantCA)
		}
		return nil
	})
}

// A client without a certificate reports only its CA; NotAfter reads a
// pair without its parsed leaf too.
func TestLoadedWithoutCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.IssueFiles(dir, "c", Leaf{DNSNames: []string{LocalServerName}, Validity: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var l loads
	if _, err := ClientTLS(Files{CA: f.CA, OnLoad: l.onLoad}, ""); err != nil {
		t.Fatal(err)
	}
	if got, n := l.latest(); n != 1 || !got.Cert.IsZero() || !got.CA.Equal(ca.cert.NotAfter) {
		t.Errorf("%d loads, last %+v; want 1 with no cert and ca %v", n, got, ca.cert.NotAfter)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	pair.Leaf = nil
	if got, err := NotAfter(pair); err != nil || !got.Equal(notAfterOf(t, f.Cert)) {
		t.Errorf("NotAfter without a leaf = %v, %v; want %v", got, err, notAfterOf(t, f.Cert))
	}
	if _, err := NotAfter(tls.Certificate{}); err == nil {
		t.Error("NotAfter of an empty pair: no error")
	}
	if _, _, err := LoadCAExpiry(f.Key); err == nil {
		t.Error("LoadCAExpiry of a key file: no error")
	}
}
