package creds

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/shardlimit/shard/poll"
)

// handshake runs a TLS handshake between server and client configs over
// loopback TCP and returns the first error and the serials each side saw.
func handshake(t *testing.T, server, client *tls.Config) (serverSerial, clientSerial string, err error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan error, 1)
	var srv *tls.Conn
	go func() {
		c, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		srv = tls.Server(c, server)
		_ = srv.SetDeadline(time.Now().Add(5 * time.Second))
		err = srv.Handshake()
		if err == nil {
			// TLS 1.3: the client's certificate is verified once its
			// flight arrives; a read makes sure of it.
			_, err = srv.Read(make([]byte, 1))
		}
		_ = c.Close()
		done <- err
	}()
	raw, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	cl := tls.Client(raw, client)
	_ = cl.SetDeadline(time.Now().Add(5 * time.Second))
	if err := cl.Handshake(); err != nil {
		<-done
		return "", "", err
	}
	_, _ = cl.Write([]byte{1})
	if serr := <-done; serr != nil {
		return "", "", serr
	}
	serverSerial = cl.ConnectionState().PeerCertificates[0].SerialNumber.String()
	if pcs := srv.ConnectionState().PeerCertificates; len(pcs) > 0 {
		clientSerial = pcs[0].SerialNumber.String()
	}
	return serverSerial, clientSerial, nil
}

func serialOf(t *testing.T, path string) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(path, strings.TrimSuffix(path, ".pem")+"-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf.SerialNumber.String()
}

func TestLocalPKIHandshakes(t *testing.T) {
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ServerTLS(l.Router, tls.RequireAndVerifyClientCert)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{LocalServerName, ""} {
		client, err := ClientTLS(l.Operator, name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "" {
			client.ServerName = "127.0.0.1" // as gRPC sets it from the address dialed
		}
		if _, got, err := handshake(t, server, client); err != nil || got != serialOf(t, l.Operator.Cert) {
			t.Fatalf("server name %q: %v, client certificate %s", name, err, got)
		}
	}
	// A wrong name, another CA's server, another CA's client: refused.
	wrongName, _ := ClientTLS(l.Operator, "elsewhere.example")
	if _, _, err := handshake(t, server, wrongName); err == nil {
		t.Error("a wrong server name was accepted")
	}
	other, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	otherServer, _ := ServerTLS(other.Router, tls.RequireAndVerifyClientCert)
	client, _ := ClientTLS(l.Operator, LocalServerName)
	if _, _, err := handshake(t, otherServer, client); err == nil {
		t.Error("a server of another CA was accepted")
	}
	otherClient, _ := ClientTLS(Files{Cert: other.Operator.Cert, Key: other.Operator.Key, CA: l.Router.CA}, LocalServerName)
	if _, _, err := handshake(t, server, otherClient); err == nil {
		t.Error("a client certificate of another CA was accepted")
	}
	if _, err := ServerTLS(Files{Cert: l.Router.Cert, Key: l.Router.Key}, tls.RequireAndVerifyClientCert); err == nil {
		t.Error("a server config without a CA")
	}
}

// Rewritten files are used from the next handshake on, without a restart:
// the server's certificate, the client's, and the CA on both sides. A
// half-written pair leaves the last good one in use.
func TestRotatedFilesAreUsed(t *testing.T) {
	dir := t.TempDir()
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	server, w, _ := serverTLS(l.Router, tls.RequireAndVerifyClientCert)
	client, _ := ClientTLS(l.Operator, LocalServerName)
	oldServer, oldClient, err := handshake(t, server, client)
	if err != nil {
		t.Fatal(err)
	}
	// A key that does not match its certificate: the old pair stays.
	key, _ := os.ReadFile(l.Operator.Key)
	if err := WriteFile(l.Router.Key, key, 0o600); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if s, _, err := handshake(t, server, client); err != nil || s != oldServer {
			t.Fatalf("after a bad key: %v, serial %s, want the old %s", err, s, oldServer)
		}
		if w.Err() == nil {
			return errors.New("the bad key is not read yet")
		}
		return nil
	})
	// New certificates of the same CA.
	if _, err := l.Issue("router", RouterID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Issue("operator", OperatorID); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		s, c, err := handshake(t, server, client)
		switch {
		case err != nil:
			return err
		case s == oldServer || c == oldClient:
			return fmt.Errorf("still the old certificates")
		}
		return nil
	})
	// A new CA: both sides move to it (the client, as it verifies a server
	// name, follows its CA file too).
	ca, err := NewCA("rotated CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l.CA = ca
	if err := os.Remove(l.Router.CA); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, uri string }{{"router", RouterID}, {"operator", OperatorID}} {
		if _, err := l.Issue(c.name, c.uri); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, func() error {
		_, _, err := handshake(t, server, client)
		return err
	})
}

func TestTokenFileFollowsRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if _, err := NewTokenFile(path); err == nil {
		t.Fatal("a missing token file")
	}
	if err := WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTokenFile(path); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("an empty token file: %v", err)
	}
	if err := WriteFile(path, []byte("slt_one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := NewTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md, err := PerRPC(tf.Token).GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer slt_one" {
		t.Fatalf("metadata %v %v", md, err)
	}
	if err := WriteFile(path, []byte("slt_two"), 0o600); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() error {
		if tok, _ := tf.Token(context.Background()); tok != "slt_two" {
			return errors.New("still the old token")
		}
		return nil
	})
	if !PerRPC(tf.Token).RequireTransportSecurity() {
		t.Error("a token may be sent in plain text")
	}
}

func TestClientConfigFile(t *testing.T) {
	dir := t.TempDir()
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "client.yaml")
	rel := "tls_ca: ca.pem\ntls_cert: operator.pem\ntls_key: operator-key.pem\ntls_server_name: localhost\nrouter: 127.0.0.1:8081\n"
	if err := os.WriteFile(path, []byte(rel), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadClientConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.TLSCA != l.Operator.CA || c.TLSCert != l.Operator.Cert || c.Flags()["router"] != "127.0.0.1:8081" || c.Flags()["token-file"] != "" {
		t.Fatalf("relative paths not resolved: %+v", c)
	}
	if cfg, err := c.TLS(); err != nil || cfg.ServerName != "localhost" {
		t.Fatalf("TLS: %v %v", cfg, err)
	}
	if err := os.WriteFile(path, []byte("tls_ca: ca.pem\ntoken: slt_inline\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadClientConfig(path); err == nil {
		t.Fatal("an unknown key (an inline token) was accepted")
	}
	if err := c.Write(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	t.Setenv(EnvConfig, path)
	if got, ok, err := FromEnv(); err != nil || !ok || got != c {
		t.Fatalf("FromEnv: %+v %v %v", got, ok, err)
	}
}
